"""Record a live KV-event stream (the `capture` verb).

vLLM's ZMQ publisher sends multipart messages ``(topic, 8-byte big-endian
sequence number, payload)``, the payload one msgpack ``KVEventBatch``. A
capture file is those payloads laid back to back, which is what
``check-stream`` reads.

The publisher binds wildcard (``tcp://*:PORT``, ``::``) and ipc/inproc
endpoints and connects to every other one, so the subscriber does the
opposite: it binds ``tcp://127.0.0.1:PORT`` and connects to ``tcp://*``-style
endpoints by their host.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec

from harness.stream import KVEventBatch

PROGRESS_EVERY_S = 1.0
_batch_decoder = msgspec.msgpack.Decoder(KVEventBatch)


def publisher_binds(endpoint: str) -> bool:
    """vLLM's rule (ZmqEventPublisher._is_bind_endpoint) for its PUB socket."""
    return (
        "*" in endpoint
        or "::" in endpoint
        or endpoint.startswith(("ipc://", "inproc://"))
    )


def count_events(payload: bytes) -> int | None:
    """Number of events in a payload, None if it is not a KVEventBatch."""
    try:
        return len(_batch_decoder.decode(payload).events)
    except msgspec.DecodeError:
        return None


def subscribe(
    endpoint: str,
    topic: str = "",
    max_events: int | None = None,
    timeout: float | None = None,
) -> Iterator[tuple[bytes, int | None]]:
    """Yield ``(payload, number of events)`` until ``max_events`` events
    arrived or ``timeout`` seconds passed; the number is None for a payload
    that is not a KVEventBatch.

    Sequence gaps (messages the subscriber missed, e.g. while it was not yet
    connected) are reported on stderr: a stream with a gap cannot be replayed
    faithfully.
    """
    import zmq  # only the subscribing verbs need pyzmq

    context = zmq.Context.instance()
    socket = context.socket(zmq.SUB)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.SUBSCRIBE, topic.encode())
    if publisher_binds(endpoint):
        socket.connect(endpoint.replace("*", "127.0.0.1"))
    else:
        socket.bind(endpoint)
    deadline = None if timeout is None else time.monotonic() + timeout
    events = 0
    expected_seq = None
    try:
        while max_events is None or events < max_events:
            wait_ms = None
            if deadline is not None:
                wait_ms = max(0, int((deadline - time.monotonic()) * 1000))
                if wait_ms == 0:
                    return
            if not socket.poll(wait_ms):
                return
            frames = socket.recv_multipart()
            if len(frames) != 3:
                print(
                    f"subscribe: skipped a message of {len(frames)} frames",
                    file=sys.stderr,
                )
                continue
            _, seq_bytes, payload = frames
            seq = int.from_bytes(seq_bytes, "big")
            if expected_seq is not None and seq != expected_seq:
                print(
                    f"subscribe: sequence gap: expected {expected_seq}, got {seq}",
                    file=sys.stderr,
                )
            expected_seq = seq + 1
            count = count_events(payload)
            events += count or 0
            yield payload, count
    finally:
        socket.close()


def run(args: argparse.Namespace) -> int:
    import zmq

    out = Path(args.out)
    batches = events = size = 0
    last_report = time.monotonic()
    try:
        with out.open("wb") as sink:
            for payload, count in subscribe(
                args.zmq, args.topic, args.max_events, args.timeout
            ):
                sink.write(payload)
                batches += 1
                size += len(payload)
                if count is None:
                    print(
                        f"capture: payload {batches - 1} is not a KVEventBatch",
                        file=sys.stderr,
                    )
                events += count or 0
                if time.monotonic() - last_report >= PROGRESS_EVERY_S:
                    last_report = time.monotonic()
                    print(
                        f"capture: {batches} batches, {events} events, {size} bytes",
                        file=sys.stderr,
                    )
    except zmq.ZMQError as exc:
        print(f"capture: {args.zmq}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"capture: {out}: {exc.strerror}", file=sys.stderr)
        return 2
    print(
        f"capture: wrote {batches} batches, {events} events, {size} bytes to {out}",
        file=sys.stderr,
    )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "capture",
        help="record a live KV-event stream to a file",
        description="Subscribe to a vLLM KV-event publisher and write its "
        "KVEventBatch payloads back to back to FILE, for check-stream.",
    )
    parser.add_argument(
        "--zmq",
        required=True,
        metavar="ENDPOINT",
        help="the endpoint in vLLM's kv_events_config: tcp://127.0.0.1:PORT is "
        "bound here (vLLM connects to it), tcp://*:PORT is connected to",
    )
    parser.add_argument(
        "--out", required=True, metavar="FILE", help="where the payloads go"
    )
    parser.add_argument(
        "--max-events",
        type=int,
        default=None,
        metavar="N",
        help="stop after N events (default: no limit)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="stop after S seconds (default: no limit; Ctrl-C also stops)",
    )
    parser.add_argument(
        "--topic", default="", metavar="T", help="ZMQ topic prefix (default: all)"
    )
    parser.set_defaults(func=run)
