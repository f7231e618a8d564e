"""How close check-stream comes to the Python floor, per batch size.

    python benchmarks/checker_floor.py [--events 200000] [--rounds 9]
        [--against CHECKOUT] [--json FILE]

The floor is what any Python reader of a capture must do before it checks
anything: frame the payloads with msgpack-python's streaming ``Unpacker``
(``skip``, ``tell``, the whole input fed at once) and decode each with one
msgspec decoder into the checker's structs (``harness.contract.wire``'s
``KVEventBatch``). The checker is what ``python -m harness check-stream FILE
--expect-empty`` does after reading the file:
``StreamChecker.apply_payloads`` (five witnesses per rule, as check-stream
keeps) and ``check_drained``; and the same with ``--for dynamo
--block-size 16`` and ``--for content-tree`` (`FOR`), each consumer's
reading applied as the checker replays. The figure is the ratio of their
throughputs, checker over floor (1 would be a checker that costs nothing
beyond the floor). The checker decodes less than the floor does: it leaves
each store's token ids undecoded (harness.contract.wire's ``StoredHead``:
it needs how many, never which), and decodes a few kilobytes of payloads
in one call; the floor stays what a reader that decodes vLLM's structs
whole must do.

The captures are synthesised here, without vLLM, in the shape vLLM 0.33's
publisher writes: ``harness.contract.wire``'s structs (field for field
vLLM's) encoded with msgspec's msgpack encoder, one ``KVEventBatch`` per
payload, laid back to back. One seeded event sequence of ``--events`` events
is cut into batches of 1, 5, 50 and 500 events: a pool of 2,048 blocks of 16
tokens on the GPU, one KV cache group, integer block hashes (vLLM's
default); each store (``BlockStored``, 1 to 8 blocks, under a live block or
none) evicts as many blocks as the pool lacks first, one ``BlockRemoved`` of
one hash each, as vLLM's BlockPool writes them; the sequence ends with every
block evicted, so the checker finds no violation in it.

Each round times the floor and the checker on every capture, in an order
that alternates from round to round (CPU time, ``time.process_time``); the
ratio printed is the median over ``--rounds`` rounds of each round's ratio.
With ``--against``, another checkout of this project (say the main
branch's) is measured in a child process of its own, with its harness first
on the path, in the same rounds: each round runs every checkout in turn.
No figure is asserted; the script only prints.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import tempfile
import time
from pathlib import Path

import benchlib

SCRIPT = Path(__file__).resolve()
BATCH_SIZES = (1, 5, 50, 500)
POOL_BLOCKS = 2048
BLOCK_SIZE = 16
WITNESSES_PER_RULE = 5  # as harness.verbs.check_stream keeps
# The consumers the checker is also timed for (check-stream --for NAME):
# Dynamo's reading drops stores of another block size (none here: every
# store is of the capture's block size), the content tree's reads every
# group; both judge parents, so every event takes the whole path.
FOR = ("dynamo", "content-tree")


# --------------------------------------------------------------------------
# The captures
# --------------------------------------------------------------------------


def synthesise(total: int, seed: int = 0) -> list:
    """About ``total`` events of a full pool that stores and evicts, then
    evicts everything."""
    from harness.contract.wire import BlockRemoved, BlockStored

    rng = random.Random(seed)
    live: list[int] = []
    events: list = []

    def evict() -> None:
        index = rng.randrange(len(live))
        live[index], live[-1] = live[-1], live[index]
        events.append(BlockRemoved([live.pop()], "GPU", group_idx=0))

    while len(events) < total - len(live):
        blocks = rng.randint(1, 8)
        while len(live) + blocks > POOL_BLOCKS:
            evict()
        parent = rng.choice(live) if live and rng.random() < 0.8 else None
        hashes = [rng.getrandbits(64) for _ in range(blocks)]
        tokens = [rng.randrange(32_000) for _ in range(blocks * BLOCK_SIZE)]
        events.append(
            BlockStored(
                hashes,
                parent,
                tokens,
                BLOCK_SIZE,
                None,
                "GPU",
                None,
                group_idx=0,
                kv_cache_spec_kind="full_attention",
            )
        )
        live.extend(hashes)
    while live:
        evict()
    return events


def write_capture(path: Path, events: list, per_batch: int) -> int:
    """``events`` in batches of ``per_batch``, as vLLM's encoder writes them."""
    import msgspec

    from harness.contract.wire import KVEventBatch

    encoder = msgspec.msgpack.Encoder()
    with path.open("wb") as sink:
        for first in range(0, len(events), per_batch):
            batch = KVEventBatch(float(first), events[first : first + per_batch])
            sink.write(encoder.encode(batch))
    return path.stat().st_size


# --------------------------------------------------------------------------
# The measures (in a child, the checkout's harness first on the path)
# --------------------------------------------------------------------------


def floor(data: bytes) -> int:
    """Frame with msgpack, decode each payload with msgspec: events decoded."""
    import msgpack
    import msgspec

    from harness.contract.wire import KVEventBatch

    decode = msgspec.msgpack.Decoder(KVEventBatch).decode
    unpacker = msgpack.Unpacker(max_buffer_size=len(data))
    unpacker.feed(data)
    view = memoryview(data)
    start = events = 0
    while True:
        try:
            unpacker.skip()
        except msgpack.OutOfData:
            return events
        end = unpacker.tell()
        events += len(decode(view[start:end]).events)
        start = end


def check(data: bytes, consumer: str | None = None) -> int:
    """check-stream FILE --expect-empty [--for CONSUMER] after reading:
    events checked. A checkout from before ``apply_payloads`` (an
    ``--against`` one) is measured as its check-stream read a capture."""
    from harness.contract.checker import StreamChecker

    checker = StreamChecker(witnesses_per_rule=WITNESSES_PER_RULE)
    if consumer is not None:
        from harness.routers.readings import reading

        size = BLOCK_SIZE if consumer == "dynamo" else None
        checker.reading = reading(consumer, size)
    if hasattr(checker, "apply_payloads"):
        checker.apply_payloads(data)
    else:
        from harness.contract.wire import decode_batches

        for _, batch in decode_batches(data):
            checker.apply(batch.events)
    checker.check_drained()
    if checker.violation_count:
        raise RuntimeError(f"{checker.violation_count} violations in a clean capture")
    return checker.events


def cases() -> list[tuple[str, object]]:
    """What a round times, per capture: the floor, the checker, and the
    checker for each consumer of `FOR` (where the checkout has --for)."""
    found = [("floor", floor), ("checker", check)]
    try:
        from harness.routers import readings  # noqa: F401
    except ImportError:
        return found
    return found + [
        (f"checker --for {name}", lambda data, name=name: check(data, name))
        for name in FOR
    ]


def timed(function, data: bytes) -> tuple[float, int]:
    gc.collect()
    started = time.process_time()
    events = function(data)
    return time.process_time() - started, events


def child() -> int:
    """Answer ``{"captures": {size: path}, "reverse": bool}`` with one
    round's CPU seconds, floor and checker, per batch size."""
    import harness

    captures: dict[str, bytes] = {}
    for request, reply in benchlib.serve_requests():
        if "captures" in request:
            captures = {
                size: Path(path).read_bytes()
                for size, path in request["captures"].items()
            }
            reply({"harness": harness.__file__})
            continue
        seconds = {}
        sizes = list(captures)
        for size in sizes[::-1] if request["reverse"] else sizes:
            measured = cases()
            if request["reverse"]:
                measured.reverse()
            times = {}
            for name, function in measured:
                times[name], times[f"{name} events"] = timed(function, captures[size])
            seconds[size] = times
        reply(seconds)
    return 0


# --------------------------------------------------------------------------
# The run and its report
# --------------------------------------------------------------------------


def run(args) -> dict:
    checkouts = {"this checkout": benchlib.REPO_ROOT}
    if args.against:
        checkouts["--against"] = args.against.resolve()
    before = benchlib.machine()
    print(benchlib.machine_line(before), flush=True)
    events = synthesise(args.events)
    with tempfile.TemporaryDirectory(prefix="checker-floor-") as work:
        captures, sizes = {}, {}
        for per_batch in BATCH_SIZES:
            path = Path(work) / f"batches-of-{per_batch}.bin"
            sizes[per_batch] = write_capture(path, events, per_batch)
            captures[str(per_batch)] = str(path)
        rounds: dict[str, list] = {label: [] for label in checkouts}
        with benchlib.children(SCRIPT, checkouts, "checker-floor-") as children:
            imported = {
                label: child.ask({"captures": captures})["harness"]
                for label, child in children.items()
            }
            for index in range(args.rounds):
                labels = list(children)
                for label in labels[::-1] if index % 2 else labels:
                    answer = children[label].ask({"reverse": bool(index % 2)})
                    rounds[label].append(answer)
                print(f"round {index + 1}/{args.rounds} done", flush=True)
    return {
        "machine_before": before,
        "machine_after": benchlib.machine(),
        "events": len(events),
        "capture_bytes": sizes,
        "harness": imported,
        "rounds": rounds,
    }


def summary(rounds: list, size: str, case: str = "checker") -> dict:
    floors = [answer[size]["floor"] for answer in rounds]
    checks = [answer[size][case] for answer in rounds]
    events = rounds[0][size][f"{case} events"]
    ratios = [f / c for f, c in zip(floors, checks, strict=True)]
    return {
        "floor": events / benchlib.median(floors),
        "checker": events / benchlib.median(checks),
        "ratios": ratios,
    }


def report(result: dict) -> None:
    print()
    print(benchlib.machine_line(result["machine_after"]))
    sizes = ", ".join(
        f"{size}: {count:,}" for size, count in result["capture_bytes"].items()
    )
    print(f"{result['events']:,} events per capture; bytes per events/batch: {sizes}")
    for label, path in result["harness"].items():
        print(f"{label}: {path}")
    rounds = len(next(iter(result["rounds"].values())))
    print()
    print(
        "| checkout | check | events/batch | floor events/s | checker events/s "
        f"| checker/floor (median of {rounds}, min-max) |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for label, answers in result["rounds"].items():
        measured = [
            case
            for case in answers[0][str(BATCH_SIZES[0])]
            if case != "floor" and not case.endswith(" events")
        ]
        for case in measured:
            for size in map(str, BATCH_SIZES):
                figures = summary(answers, size, case)
                print(
                    f"| {label} | {case} | {size} | {figures['floor']:,.0f} "
                    f"| {figures['checker']:,.0f} "
                    f"| {benchlib.spread(figures['ratios'])} |"
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/checker_floor.py")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--events", type=int, default=200_000, help="per capture")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--against", type=Path, help="another checkout of this project to compare"
    )
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args(argv)
    return benchlib.run_main(args, child, run, report)


if __name__ == "__main__":
    sys.exit(main())
