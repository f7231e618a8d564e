"""`capture`: a live KV-event stream recorded to a file, for check-stream."""

import sys
import time
from pathlib import Path

from harness.verbs import (
    add_subscription_arguments,
    positive_int,
    positive_seconds,
    subscription_endpoint,
    writable_file,
)

PROGRESS_EVERY_S = 1.0


def register(parser) -> None:
    parser.description = (
        "Subscribe to a vLLM KV-event publisher and write its KVEventBatch "
        "payloads back to back to FILE, and their sequence numbers to FILE.seq "
        "(one per line), for check-stream. FILE is written under another name "
        "and renamed when the capture ends, so an existing FILE is replaced "
        "only by a capture that received something. Messages missing from the "
        "sequence make the capture incomplete (its own exit status). Needs "
        "the harness's capture extra (pyzmq)."
    )
    add_subscription_arguments(parser, required=True)
    parser.add_argument(
        "--out", required=True, metavar="FILE", help="where the payloads go"
    )
    parser.add_argument(
        "--max-events",
        type=positive_int,
        default=None,
        metavar="N",
        help="stop after N events (default: no limit)",
    )
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=None,
        metavar="S",
        help="stop after S seconds (default: no limit; Ctrl-C also stops)",
    )
    parser.set_defaults(run=run)


def run(args) -> int:
    from harness import scratch
    from harness.contract.subscribe import sequence_file
    from harness.errors import OutputError

    out = Path(args.out)
    if problem := writable_file(out) or writable_file(sequence_file(out)):
        raise OutputError(problem)  # before anything arrives
    try:
        with (
            scratch.replacing(out, "capture") as sink,
            scratch.replacing(sequence_file(out), "capture") as numbers,
        ):
            capture = record(args, sink, numbers)
    except OSError as exc:
        raise OutputError(f"{out}: {exc.strerror or exc}") from None
    stopped = f"stopped by {capture.stopped}; " if capture.stopped else ""
    print(
        f"capture: {stopped}wrote {capture.batches} batches, {capture.events} "
        f"events, {capture.size} bytes to {out} (sequence numbers in "
        f"{sequence_file(out)})",
        file=sys.stderr,
    )
    if capture.sequence.incomplete():
        from harness.errors import IncompleteStream

        raise IncompleteStream(
            subscription_endpoint(args)[0], capture.sequence.incomplete()
        )
    return 0


class Capture:
    """What a capture received so far."""

    def __init__(self):
        from harness.contract.subscribe import SequenceCheck

        self.batches = self.events = self.size = 0
        self.sequence = SequenceCheck()
        self.stopped: str | None = None


def record(args, sink, numbers) -> Capture:
    """Write each payload to sink and its sequence number to numbers until
    the subscription ends: --max-events, --timeout, or a stop signal (Ctrl-C,
    SIGTERM), which ends it as the other two do. Nothing arrived is an
    error, and then neither file is written."""
    from harness.contract.subscribe import subscribe_numbered
    from harness.errors import IncompleteStream, Stopped
    from harness.processes import stop_signals_held

    capture = Capture()
    last_report = time.monotonic()
    endpoint, bind = subscription_endpoint(args)
    messages = subscribe_numbered(
        endpoint, args.topic, args.max_events, args.timeout, bind
    )
    try:
        for seq, payload, count in messages:
            with stop_signals_held():  # a payload and its number, or neither
                sink.write(payload)
                numbers.write(f"{seq}\n".encode())
                sink.flush()  # what arrived is on disk if the capture is killed
                numbers.flush()
                capture.sequence.see(seq)
                capture.batches += 1
                capture.size += len(payload)
                capture.events += count or 0
            if count is None:
                print(
                    f"capture: payload {capture.batches - 1} is not a KVEventBatch",
                    file=sys.stderr,
                )
            if time.monotonic() - last_report >= PROGRESS_EVERY_S:
                last_report = time.monotonic()
                print(
                    f"capture: {capture.batches} batches, {capture.events} events, "
                    f"{capture.size} bytes",
                    file=sys.stderr,
                )
    except KeyboardInterrupt:
        capture.stopped = "Ctrl-C"
    except Stopped as exc:
        capture.stopped = str(exc)
    finally:
        messages.close()
    if capture.batches == 0:
        waited = (
            f" in {args.timeout:g} s" if args.timeout and not capture.stopped else ""
        )
        raise IncompleteStream(
            endpoint,
            f"no message arrived{waited}{messages.malformed_note()}; {args.out} "
            f"left as it was",
        )
    return capture
