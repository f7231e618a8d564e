"""A live KV-event stream, from vLLM's ZMQ publisher.

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

import sys
import time
from collections.abc import Iterator

import msgspec

from harness.contract.wire import KVEventBatch
from harness.errors import SubscriptionError, require

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
    zmq = require("zmq", "capture")  # only the subscribing verbs need pyzmq

    try:
        yield from _messages(zmq, endpoint, topic, max_events, timeout)
    except zmq.ZMQError as exc:
        raise SubscriptionError(f"{endpoint}: {exc}") from None


def _messages(zmq, endpoint, topic, max_events, timeout):
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
