"""`check-stream`: captured KV-event streams checked against the contract."""

import time
from dataclasses import dataclass
from pathlib import Path

from harness.routers import CONSUMER_NAMES
from harness.targets import TIERS
from harness.verbs import (
    add_subscription_arguments,
    positive_int,
    positive_seconds,
    python_path,
    subscription_endpoint,
    utf8_text,
)

WITNESSES_PER_RULE = 5
# A live check prints a progress line on stderr this often, in seconds of
# this clock.
PROGRESS_S = 5.0
PROGRESS_CLOCK = time.monotonic


def register(parser) -> None:
    parser.description = (
        "Replay KVEventBatch payloads (files of payloads laid back to back, or a "
        "live ZMQ publisher) and report contract violations by rule. Exit 0 "
        "clean, 1 violations; a stream that is empty, received nothing or misses "
        "messages (a sequence gap, live or in FILE.seq beside a capture) is "
        "incomplete, and unreadable input an error, each with its own status "
        "(python -m harness --help). With several inputs, each is reported and "
        "the status is the worst. Live (--zmq or --listen: the capture extra, "
        "pyzmq): a check that joins a running engine asks --replay for what it "
        "missed, else starts at the first AllBlocksCleared (a prefix-cache "
        "reset, the first complete state) and says where it joined; Ctrl-C "
        "ends it as --timeout does; it says on stderr when it has subscribed, "
        f"then every {PROGRESS_S:g} s what it has received and checked so far. "
        "A stream of several KV cache groups gets a line per group, clean or not. "
        "A stream does not say its tier: --tier, or --python of the engine's "
        "environment (its install receipt), says it, and the strict tier's K6 "
        "(a Mamba or sliding-window store after a block the pool let go before "
        "its call) is then reported as kept as released, not as violations. "
        "--for NAME judges only what that consumer reads, and the status says "
        "whether the stream is sound for it (docs/checking-streams.md)."
    )
    parser.add_argument("files", nargs="*", metavar="FILE")
    add_subscription_arguments(parser, required=False)
    parser.add_argument(
        "--replay",
        type=utf8_text,
        metavar="ENDPOINT",
        help="the engine's kv_events_config replay_endpoint (vLLM binds it; "
        "tcp://HOST:PORT), asked for the messages sent before the check "
        "joined or dropped on the way",
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
    parser.add_argument(
        "--for",
        dest="consumer",
        choices=CONSUMER_NAMES,
        help="judge only what this consumer reads (its groups and kinds, its "
        "block size, whether it needs parents or tokens): exit 0 when the "
        "stream is sound for it, 1 when not",
    )
    parser.add_argument(
        "--block-size",
        type=positive_int,
        metavar="N",
        help="with --for dynamo: its kv_block_size (the engine's --block-size); "
        "its relay drops every block of another size",
    )
    told = parser.add_mutually_exclusive_group()
    told.add_argument(
        "--tier",
        choices=TIERS,
        help="the tier of the series the engine runs (of --target's series)",
    )
    told.add_argument(
        "--python",
        type=python_path,
        metavar="PATH",
        help="the engine environment's Python: its install receipt says the "
        "tier (python -m harness status --python PATH shows it)",
    )
    parser.add_argument(
        "--target",
        default="main",
        help="with --tier: the target whose tier it is (default main)",
    )
    parser.set_defaults(run=run, usage_error=parser.error)


@dataclass
class Checked:
    """One input checked: its checker, and what is missing if it is not whole."""

    source: str
    checker: object
    incomplete: str | None = None
    notes: tuple[str, ...] = ()


def run(args) -> int:
    from harness.errors import IncompleteStream, UnreadableInput
    from harness.log import error

    live = args.zmq or args.listen
    if not args.files and not live:
        args.usage_error("give FILE... or --zmq ENDPOINT (or --listen ENDPOINT)")
    if args.replay and not live:
        args.usage_error("--replay goes with --zmq or --listen")
    if (args.consumer == "dynamo") != (args.block_size is not None):
        args.usage_error(
            "--for dynamo needs --block-size N, its kv_block_size"
            if args.block_size is None
            else "--block-size goes with --for dynamo"
        )
    tier = told_tier(args)
    status = 0
    sources = [
        (name, lambda name=name: check_file(Path(name), args)) for name in args.files
    ]
    if live:
        sources.append((live, lambda: check_zmq(args, tier)))
    for _, check in sources:
        try:
            checked = check()
        except UnreadableInput as exc:
            error(str(exc))
            status = _worse(status, exc.exit_code)
            continue
        if args.expect_empty:
            checked.checker.check_drained()
        judgement = _judgement(checked.checker, tier)
        print("\n".join(format_report(checked, judgement)), flush=True)
        if checked.incomplete:
            error(str(IncompleteStream(checked.source, checked.incomplete)))
            status = _worse(status, IncompleteStream.exit_code)
        elif judgement.violation_count:
            status = _worse(status, 1)
    return status


def told_tier(args):
    """The tier the check was told: --tier (of --target's series), the
    receipt beside the vllm of --python (none: released), or none."""
    from harness.contract.judgement import Tier
    from harness.installed.installation import whole_series
    from harness.targets import get_target

    if args.tier:
        fixes = get_target(args.target).fixes[args.tier]
        return Tier(args.tier, f"--tier, target {args.target}", fixes)
    if args.python is None:
        return Tier(None)
    located, receipt = whole_series(args.python)
    if receipt is None:
        return Tier("released", f"{located.dist.describe()}, no series installed")
    fixes = get_target(receipt.target).fixes[receipt.tier]
    return Tier(receipt.tier, f"the receipt of {located.dist.describe()}", fixes)


def _judgement(checker, tier):
    from harness.contract.judgement import Judgement

    return Judgement(checker, tier)


def _worse(status: int, other: int) -> int:
    """The worse of two statuses: unreadable, then incomplete, then found."""
    from harness.errors import IncompleteStream, UnreadableInput

    order = (0, 1, IncompleteStream.exit_code, UnreadableInput.exit_code)
    return max(status, other, key=order.index)


def _checker(args=None):
    """The checker of one input: for the consumer of --for, if any."""
    from harness.contract.checker import StreamChecker
    from harness.routers.readings import reading

    name = getattr(args, "consumer", None)
    consumer = name and reading(name, args.block_size)
    return StreamChecker(witnesses_per_rule=WITNESSES_PER_RULE, reading=consumer)


def check_file(path: Path, args=None) -> Checked:
    """Check a capture file, read a chunk at a time; its sequence numbers,
    if FILE.seq is beside it, say whether messages are missing."""
    from harness.contract.subscribe import (
        SequenceCheck,
        read_sequence_numbers,
        sequence_file,
    )
    from harness.errors import UnreadableInput, UnreadableStream
    from harness.reading import Refused

    checker = _checker(args)
    try:
        with path.open("rb") as stream:
            checker.apply_payloads(stream)
    except OSError as exc:
        raise UnreadableStream("", exc.strerror or str(exc), str(path)) from None
    except UnreadableStream as exc:
        raise exc.located(str(path)) from None
    if checker.batches == 0:
        return Checked(str(path), checker, "empty: no KVEventBatch in it")
    numbers_file = sequence_file(path)
    if not numbers_file.is_file():
        if numbers_file.exists() or numbers_file.is_symlink():
            raise UnreadableInput(
                f"{numbers_file} is not a file (a directory, a device, a pipe, "
                f"or a dangling link), so the sequence numbers of {path} cannot "
                f"be read; move it away to check {path} without them"
            )
        return Checked(str(path), checker)
    try:  # one number more than the payloads says that there are more
        numbers = read_sequence_numbers(numbers_file, checker.batches + 1)
    except OSError as exc:
        raise UnreadableInput(f"{numbers_file}: {exc.strerror}") from None
    except Refused as exc:
        raise UnreadableInput(f"{numbers_file}: {exc}") from None
    if len(numbers) != checker.batches:
        many = len(numbers) > checker.batches
        count = f"more than {checker.batches}" if many else len(numbers)
        raise UnreadableInput(
            f"{numbers_file}: {count} sequence number(s) for the "
            f"{checker.batches} payload(s) of {path}; they do not belong together"
        )
    sequence = SequenceCheck()
    for number in numbers:
        sequence.see(number)
    return Checked(str(path), checker, sequence.incomplete())


def check_zmq(args, tier) -> Checked:
    """Check a live subscription until it ends: --max-events, --timeout, or a
    stop signal (Ctrl-C), which ends the stream as the other two do. Gaps are
    filled from --replay where it holds them; a stream joined late is checked
    from its first complete state (`StartPoint`)."""
    from harness.contract.replay import with_replay
    from harness.contract.subscribe import (
        SequenceCheck,
        StartPoint,
        Watch,
        subscribe_numbered,
    )
    from harness.contract.wire import MAX_PAYLOAD_BYTES, decode_batch
    from harness.errors import Stopped, UnreadableStream
    from harness.log import progress
    from harness.processes import stop_signals_held

    endpoint, bind = subscription_endpoint(args)
    checker = _checker(args)
    sequence = SequenceCheck()
    start = StartPoint()
    replayed: list[tuple[int, int]] = []
    stopped = None
    received = 0
    watch = Watch(  # the lambdas read received as it is when they are called
        lambda: progress(subscribed_line(endpoint, bind, args.topic)),
        lambda: progress(live_progress(received, start, _judgement(checker, tier))),
        PROGRESS_S,
        PROGRESS_CLOCK,
    )
    subscription = subscribe_numbered(
        endpoint, args.topic, args.max_events, args.timeout, bind, watch
    )
    try:
        for seq, payload, _ in with_replay(
            subscription, args.replay, args.topic, replayed
        ):
            with stop_signals_held():  # a batch is applied whole
                received += 1
                events = decode_batch(payload, f"message {seq}", tokens=False).events
                if (checkable := start.checkable(seq, events)) is None:
                    continue
                if sequence.received == 0:
                    sequence.expected = start.start
                sequence.see(seq)
                checker.apply(checkable)
    except UnreadableStream as exc:
        raise exc.located(endpoint) from None
    except KeyboardInterrupt:
        stopped = "Ctrl-C"
    except Stopped as exc:
        stopped = str(exc)
    finally:
        subscription.close()
    notes = [f"messages {a}-{b} replayed from {args.replay}" for a, b in replayed]
    if stopped:
        notes.append(f"stopped by {stopped} after {received} message(s)")
    if subscription.disconnects:
        notes.append(
            f"the publisher's connection closed {subscription.disconnects} "
            f"time(s): the engine stopped, or sent a message over the "
            f"{MAX_PAYLOAD_BYTES >> 20} MiB limit (ZMQ refuses it by closing the "
            f"connection)"
        )
    if (joined := start.describe()) is not None:
        notes.append(joined)
    checked = Checked(endpoint, checker, notes=tuple(notes))
    if not received:
        waited = (
            f"stopped by {stopped} before any message arrived"
            if stopped
            else f"no message arrived in {args.timeout:g} s"
            if args.timeout
            else "no message arrived"
        )
        waited += subscription.malformed_note()
        return Checked(endpoint, checker, waited, checked.notes)
    if start.start is None:
        return Checked(
            endpoint,
            checker,
            f"{joined}, and no AllBlocksCleared followed to start from: nothing "
            f"checked. Give --replay the engine's replay_endpoint, or reset its "
            f"prefix cache while checking (POST /reset_prefix_cache, with "
            f"VLLM_SERVER_DEV_MODE=1)",
            checked.notes,
        )
    incomplete = sequence.incomplete()
    if (
        incomplete is None
        and subscription.disconnects
        and not (subscription.since_disconnect)
    ):
        incomplete = (
            "the publisher's connection closed after the last message and "
            "nothing followed: the engine stopped, or its next message was "
            "refused for its size"
        )
    return Checked(endpoint, checker, incomplete, checked.notes)


def subscribed_line(endpoint: str, bind: bool, topic: str) -> str:
    """The line a live check prints once its socket is subscribed."""
    how = (
        "bound, waiting for the engine to connect"
        if bind
        else "connected to the engine's publisher"
    )
    topics = f"topic {topic!r}" if topic else "every topic"
    return f"check-stream: subscribed to {endpoint} ({how}), {topics}"


def live_progress(received: int, start, judgement) -> str:
    """A live check's progress line: what arrived and was checked so far."""
    done = f"check-stream: {received} message(s) received"
    if received and start.start is None:
        return (
            f"{done}, none checked yet: waiting for an AllBlocksCleared to start from"
        )
    checker = judgement.checker
    return (
        f"{done}; {checker.batches} batches, {checker.events} events checked, "
        f"{judgement.violation_count} violations so far"
    )


def format_report(checked: Checked, judgement=None) -> list[str]:
    """The report of one input: its first line, its notes, then the
    judgement's (harness.contract.judgement; by default, for no tier)."""
    from harness.contract.judgement import Tier

    checker = checked.checker
    judgement = judgement or _judgement(checker, Tier(None))
    reading = checker.reading
    of = f" for {reading.name}" if reading is not None else ""
    lines = [
        f"{checked.source}: {checker.batches} batches, {checker.events} events, "
        f"{checker.duplicate_stores} stores of an already-live hash, "
        f"{judgement.violation_count} violations{of}"
    ]
    lines.extend(f"  {note}" for note in checked.notes)
    if checked.incomplete:
        lines.append(f"  incomplete: {checked.incomplete}")
    return lines + judgement.lines()
