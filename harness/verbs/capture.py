"""`capture`: a live KV-event stream recorded to a file, for check-stream."""

import sys
import time
from pathlib import Path

PROGRESS_EVERY_S = 1.0


def register(parser) -> None:
    parser.description = (
        "Subscribe to a vLLM KV-event publisher and write its KVEventBatch "
        "payloads back to back to FILE, for check-stream. Needs the harness's "
        "capture extra (pyzmq)."
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
    parser.set_defaults(run=run)


def run(args) -> int:
    from harness.contract.subscribe import subscribe
    from harness.errors import OutputError

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
    except OSError as exc:
        raise OutputError(f"{out}: {exc.strerror}") from None
    print(
        f"capture: wrote {batches} batches, {events} events, {size} bytes to {out}",
        file=sys.stderr,
    )
    return 0
