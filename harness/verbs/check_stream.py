"""`check-stream`: captured KV-event streams checked against the contract."""

from dataclasses import dataclass
from pathlib import Path

from harness.contract import title
from harness.verbs import positive_int, positive_seconds, utf8_text

WITNESSES_PER_RULE = 5


def register(parser) -> None:
    parser.description = (
        "Replay KVEventBatch payloads (files of payloads laid back to back, or a "
        "live ZMQ publisher) and report contract violations by rule. Exit 0 "
        "clean, 1 violations; a stream that is empty, received nothing or misses "
        "messages (a sequence gap, live or in FILE.seq beside a capture) is "
        "incomplete, and unreadable input an error, each with its own status "
        "(python -m harness --help). With several inputs, each is reported and "
        "the status is the worst."
    )
    parser.add_argument("files", nargs="*", metavar="FILE")
    parser.add_argument(
        "--zmq",
        type=utf8_text,
        metavar="ENDPOINT",
        help="subscribe to a live publisher (needs the capture extra, pyzmq)",
    )
    parser.add_argument(
        "--topic", default="", type=utf8_text, help="ZMQ topic prefix (default: all)"
    )
    parser.add_argument(
        "--max-events",
        type=positive_int,
        default=None,
        help="stop the subscription after N events",
    )
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=None,
        help="stop the subscription after S seconds",
    )
    parser.add_argument(
        "--expect-empty",
        action="store_true",
        help="the stream ends with everything evicted: report live hashes (C5)",
    )
    parser.set_defaults(run=run, usage_error=parser.error)


@dataclass
class Checked:
    """One input checked: its checker, and what is missing if it is not whole."""

    source: str
    checker: object
    incomplete: str | None = None


def run(args) -> int:
    from harness.errors import IncompleteStream, UnreadableInput
    from harness.log import error

    if not args.files and not args.zmq:
        args.usage_error("give FILE... or --zmq ENDPOINT")
    status = 0
    sources = [(name, lambda name=name: check_file(Path(name))) for name in args.files]
    if args.zmq:
        sources.append((args.zmq, lambda: check_zmq(args)))
    for _, check in sources:
        try:
            checked = check()
        except UnreadableInput as exc:
            error(str(exc))
            status = _worse(status, exc.exit_code)
            continue
        if args.expect_empty:
            checked.checker.check_drained()
        print("\n".join(format_report(checked)), flush=True)
        if checked.incomplete:
            error(str(IncompleteStream(checked.source, checked.incomplete)))
            status = _worse(status, IncompleteStream.exit_code)
        elif checked.checker.violation_count:
            status = _worse(status, 1)
    return status


def _worse(status: int, other: int) -> int:
    """The worse of two statuses: unreadable, then incomplete, then found."""
    from harness.errors import IncompleteStream, UnreadableInput

    order = (0, 1, IncompleteStream.exit_code, UnreadableInput.exit_code)
    return max(status, other, key=order.index)


def _checker():
    from harness.contract.checker import StreamChecker

    return StreamChecker(witnesses_per_rule=WITNESSES_PER_RULE)


def check_file(path: Path) -> Checked:
    """Check a capture file, read a chunk at a time; its sequence numbers,
    if FILE.seq is beside it, say whether messages are missing."""
    from harness.contract.subscribe import (
        SequenceCheck,
        read_sequence_numbers,
        sequence_file,
    )
    from harness.contract.wire import decode_batches
    from harness.errors import UnreadableInput, UnreadableStream

    checker = _checker()
    try:
        with path.open("rb") as stream:
            for _, batch in decode_batches(stream):
                checker.apply(batch.events)
    except OSError as exc:
        raise UnreadableStream("", exc.strerror or str(exc), str(path)) from None
    except UnreadableStream as exc:
        raise exc.located(str(path)) from None
    if checker.batches == 0:
        return Checked(str(path), checker, "empty: no KVEventBatch in it")
    numbers_file = sequence_file(path)
    if not numbers_file.is_file():
        return Checked(str(path), checker)
    try:
        numbers = read_sequence_numbers(numbers_file)
    except OSError as exc:
        raise UnreadableInput(f"{numbers_file}: {exc.strerror}") from None
    if len(numbers) != checker.batches:
        raise UnreadableInput(
            f"{numbers_file}: {len(numbers)} sequence number(s) for the "
            f"{checker.batches} payload(s) of {path}; they do not belong together"
        )
    sequence = SequenceCheck()
    for number in numbers:
        sequence.see(number)
    return Checked(str(path), checker, sequence.incomplete())


def check_zmq(args) -> Checked:
    """Check a live subscription until it ends: --max-events, --timeout, or a
    stop signal (Ctrl-C), which ends the stream as the other two do."""
    from harness.contract.subscribe import SequenceCheck, subscribe_numbered
    from harness.contract.wire import decode_batch
    from harness.errors import Stopped, UnreadableStream
    from harness.log import progress
    from harness.processes import stop_signals_held

    checker = _checker()
    sequence = SequenceCheck()
    messages = subscribe_numbered(args.zmq, args.topic, args.max_events, args.timeout)
    try:
        for index, (seq, payload, _) in enumerate(messages):
            with stop_signals_held():  # a batch is applied whole
                sequence.see(seq)
                checker.apply(decode_batch(payload, f"message {index}").events)
    except UnreadableStream as exc:
        raise exc.located(args.zmq) from None
    except (KeyboardInterrupt, Stopped):
        progress(f"subscription stopped after {sequence.received} message(s)")
    finally:
        messages.close()
    if sequence.received == 0:
        waited = f" in {args.timeout:g} s" if args.timeout else ""
        return Checked(args.zmq, checker, f"no message arrived{waited}")
    return Checked(args.zmq, checker, sequence.incomplete())


def format_report(checked: Checked) -> list[str]:
    checker = checked.checker
    lines = [
        f"{checked.source}: {checker.batches} batches, {checker.events} events, "
        f"{checker.duplicate_stores} stores of an already-live hash, "
        f"{checker.violation_count} violations"
    ]
    if checked.incomplete:
        lines.append(f"  incomplete: {checked.incomplete}")
    witnesses: dict[str, list] = {}
    for violation in checker.violations:
        witnesses.setdefault(violation.rule, []).append(violation)
    for rule in sorted(checker.counts):
        found = checker.counts[rule]
        lines.append(f"  {title(rule)}: {found}")
        lines.extend(f"    {violation}" for violation in witnesses.get(rule, []))
        if found > len(witnesses.get(rule, [])):
            lines.append(f"    ... {found - len(witnesses.get(rule, []))} more")
    if len(checker.view_kinds) > 1 and checker.view_counts:
        from harness.contract.checker import view_order

        lines.append("  by view (medium, group, kind): violations at events")
        by_view = checker.counts_by_view()
        for key in sorted(checker.view_kinds, key=view_order):
            rules = by_view.get(key, {})
            found = ", ".join(f"{rule} {count}" for rule, count in rules.items())
            medium, group = key
            kind = checker.view_kinds[key]
            lines.append(f"    {medium} group {group} ({kind}): {found or 'none'}")
    return lines
