"""`check-stream`: captured KV-event streams checked against the contract."""

from pathlib import Path

from harness.contract import title

WITNESSES_PER_RULE = 5


def register(parser) -> None:
    parser.description = (
        "Replay KVEventBatch payloads (files of payloads laid back to back, or a "
        "live ZMQ publisher) and report contract violations by rule. Exit 0 "
        "clean, 1 violations; unreadable input is an error (exit statuses: "
        "python -m harness --help)."
    )
    parser.add_argument("files", nargs="*", metavar="FILE")
    parser.add_argument(
        "--zmq",
        metavar="ENDPOINT",
        help="subscribe to a live publisher (needs the capture extra, pyzmq)",
    )
    parser.add_argument("--topic", default="", help="ZMQ topic prefix (default: all)")
    parser.add_argument(
        "--max-events",
        type=int,
        default=None,
        help="stop the subscription after N events",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="stop the subscription after S seconds",
    )
    parser.add_argument(
        "--expect-empty",
        action="store_true",
        help="the stream ends with everything evicted: report live hashes (C5)",
    )
    parser.set_defaults(run=run, usage_error=parser.error)


def run(args) -> int:
    if not args.files and not args.zmq:
        args.usage_error("give FILE... or --zmq ENDPOINT")
    results = [(name, check_file(Path(name), args.expect_empty)) for name in args.files]
    if args.zmq:
        results.append((args.zmq, check_zmq(args)))
    for source, checker in results:
        print("\n".join(format_report(source, checker)))
    return 1 if any(checker.violations for _, checker in results) else 0


def check_file(path: Path, expect_empty: bool):
    from harness.contract.checker import StreamChecker
    from harness.contract.wire import decode_batches
    from harness.errors import UnreadableStream

    checker = StreamChecker()
    try:
        data = path.read_bytes()
        for _, batch in decode_batches(data):
            checker.apply(batch.events)
    except OSError as exc:
        raise UnreadableStream("", exc.strerror, str(path)) from None
    except UnreadableStream as exc:
        raise exc.located(str(path)) from None
    if expect_empty:
        checker.check_drained()
    return checker


def check_zmq(args):
    from harness.contract.checker import StreamChecker
    from harness.contract.subscribe import subscribe
    from harness.contract.wire import decode_batch
    from harness.errors import UnreadableStream

    checker = StreamChecker()
    messages = subscribe(args.zmq, args.topic, args.max_events, args.timeout)
    try:
        for index, (payload, _) in enumerate(messages):
            checker.apply(decode_batch(payload, f"message {index}").events)
    except UnreadableStream as exc:
        raise exc.located(args.zmq) from None
    if args.expect_empty:
        checker.check_drained()
    return checker


def format_report(source: str, checker) -> list[str]:
    by_rule: dict[str, list] = {}
    for violation in checker.violations:
        by_rule.setdefault(violation.rule, []).append(violation)
    lines = [
        f"{source}: {checker.batches} batches, {checker.events} events, "
        f"{checker.duplicate_stores} stores of an already-live hash, "
        f"{len(checker.violations)} violations"
    ]
    for rule in sorted(by_rule):
        found = by_rule[rule]
        lines.append(f"  {title(rule)}: {len(found)}")
        lines.extend(f"    {violation}" for violation in found[:WITNESSES_PER_RULE])
        if len(found) > WITNESSES_PER_RULE:
            lines.append(f"    ... {len(found) - WITNESSES_PER_RULE} more")
    return lines
