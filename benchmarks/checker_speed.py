"""How fast the stream checker replays a large capture, against msgspec
decoding the same bytes alone and against Dynamo's radix tree applying the
same stream.

    python benchmarks/checker_speed.py [--capture FILE] [--events 1000000]
        [--tree PATH] [--repeats 5] [--dynamo-python PYTHON] [--json FILE]

The capture (``--capture``, default ``checker-capture.bin`` in the system's
temporary directory) is made once if it does not exist: the seeded workloads
of ``harness.workloads.drivers`` (every BlockPool and KVCacheManager config, in turn,
seed after seed, ``--ops`` operations and an evict-everything each) run in
``--tree`` (default: the harness's cached default-tier tree of target main)
and their streams, one ``KVEventBatch`` per operation as vLLM's encoder
writes it, are concatenated until the file holds ``--events`` events. Every
workload ends with everything evicted, so the concatenation is itself a
stream that a consumer can replay.

Measured in this interpreter, ``--repeats`` times each, interleaved, median
(CPU time, ``time.process_time``; wall time alongside):

- decode alone: msgspec decoding every payload into the checker's
  ``KVEventBatch`` structs, the payload boundaries found beforehand;
- split and decode: ``harness.contract.wire.decode_batches`` over the bytes;
- checker: what ``python -m harness check-stream FILE --expect-empty`` does
  after reading the file (decode_batches, ``StreamChecker.apply`` per batch,
  ``check_drained``); also with ``track_ancestry=True`` (C6's bookkeeping);
- Dynamo (informational, once): ``harness.routers.dynamo.DynamoAdapter`` feeding
  a fresh ``dynamo._core.RadixTree``, split into building the JSON events
  (Dynamo's token hashes included) and ``RadixTree.apply_event`` alone. Runs
  here when ``dynamo`` imports, else under ``--dynamo-python`` (an
  interpreter with ai-dynamo-runtime 1.6.1 and msgspec).

No figure is asserted; the script only prints.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchlib

SCRIPT = Path(__file__).resolve()
DEFAULT_CAPTURE = Path(tempfile.gettempdir()) / "checker-capture.bin"


# --------------------------------------------------------------------------
# Making the capture (inside a vLLM tree)
# --------------------------------------------------------------------------


def generate(out: Path, events_wanted: int, ops: int) -> dict:
    import random

    import msgspec
    from vllm.distributed.kv_events import KVEventBatch
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import init_none_hash

    from harness.workloads.drivers import CONFIGS, evict_everything

    init_none_hash(sha256)
    encoder = msgspec.msgpack.Encoder()
    events = batches = runs = 0
    partial = out.with_suffix(out.suffix + ".part")
    with partial.open("wb") as sink:
        seed = 0
        while events < events_wanted:
            for config in CONFIGS:
                driver = CONFIGS[config](random.Random(seed))
                take = getattr(driver, "manager", driver.pool).take_events
                for index in range(ops + 1):
                    if index < ops:
                        driver.step()
                    else:
                        evict_everything(driver)
                    taken = take()
                    if taken:
                        sink.write(
                            encoder.encode(KVEventBatch(ts=float(index), events=taken))
                        )
                        events += len(taken)
                        batches += 1
                runs += 1
            seed += 1
    partial.rename(out)
    return {"events": events, "batches": batches, "runs": runs, "ops": ops}


def make_capture(args) -> dict:
    trees = benchlib.parse_trees(
        [f"tree={args.tree}"] if args.tree else None, ("default",)
    )
    tree = trees.get("tree") or trees["default"]
    print(f"making {args.capture} in {tree}", flush=True)
    command = [
        sys.executable,
        str(SCRIPT),
        "--generate",
        "--capture",
        str(args.capture),
        "--events",
        str(args.events),
        "--ops",
        str(args.ops),
    ]
    result = subprocess.run(
        command,
        env=benchlib.tree_env(tree),
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    made = json.loads(result.stdout.strip().splitlines()[-1])
    made["tree"] = str(tree)
    return made


# --------------------------------------------------------------------------
# Measuring (needs only msgspec, and dynamo for its part)
# --------------------------------------------------------------------------


def timed(function) -> tuple[float, float, object]:
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    value = function()
    return time.process_time() - cpu, time.perf_counter() - wall, value


def decode_alone(payloads: list) -> int:
    from harness.contract.wire import _batch_decoder

    decode = _batch_decoder.decode
    events = 0
    for payload in payloads:
        events += len(decode(payload).events)
    return events


def split_and_decode(data: bytes) -> int:
    from harness.contract.wire import decode_batches

    return sum(len(batch.events) for _, batch in decode_batches(data))


def check(data: bytes, track_ancestry: bool = False) -> int:
    from harness.contract.checker import StreamChecker
    from harness.contract.wire import decode_batches

    checker = StreamChecker(track_ancestry=track_ancestry)
    for _, batch in decode_batches(data):
        checker.apply(batch.events)
    checker.check_drained()
    return checker.events


def measure_local(data: bytes, repeats: int) -> dict:
    from harness.contract.wire import split_payloads

    payloads = [bytes(payload) for _, payload in split_payloads(data)]
    cases = {
        "decode alone": lambda: decode_alone(payloads),
        "split and decode": lambda: split_and_decode(data),
        "checker": lambda: check(data),
        "checker, track_ancestry": lambda: check(data, track_ancestry=True),
    }
    figures = {name: {"cpu": [], "wall": [], "events": None} for name in cases}
    for repeat in range(repeats):
        names = list(cases) if repeat % 2 == 0 else list(cases)[::-1]
        for name in names:
            cpu, wall, events = timed(cases[name])
            figures[name]["cpu"].append(cpu)
            figures[name]["wall"].append(wall)
            figures[name]["events"] = events
        print(f"repeat {repeat + 1}/{repeats} done", flush=True)
    from harness.contract.checker import StreamChecker
    from harness.contract.wire import decode_batches

    checker = StreamChecker()
    for _, batch in decode_batches(data):
        checker.apply(batch.events)
    checker.check_drained()
    return {
        "batches": len(payloads),
        "cases": figures,
        "violations": len(checker.violations),
        "duplicate_stores": checker.duplicate_stores,
    }


def measure_dynamo(data: bytes, chunk: int = 20000) -> dict:
    """Feed the stream to a fresh RadixTree through the consumers adapter:
    seconds building the JSON events, seconds in apply_event."""
    os.environ.setdefault("DYN_LOG", "error")
    from dynamo._core import RadixTree

    from harness.contract.wire import decode_batches
    from harness.routers.dynamo import DynamoAdapter

    class Recorded:
        def __init__(self):
            self.sent = []

        def apply_event(self, worker, payload):
            self.sent.append((worker, payload))

    tree = RadixTree()
    recorded = Recorded()
    adapter = DynamoAdapter(recorded)
    build_cpu = build_wall = apply_cpu = apply_wall = 0.0
    events = rejected = not_sent = 0
    pending = []

    def flush() -> None:
        nonlocal build_cpu, build_wall, apply_cpu, apply_wall, rejected, not_sent
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        for event in pending:
            not_sent += len(adapter.apply(event))
        build_cpu += time.process_time() - cpu
        build_wall += time.perf_counter() - wall
        sent, recorded.sent = recorded.sent, []
        pending.clear()
        apply = tree.apply_event
        wall, cpu = time.perf_counter(), time.process_time()
        for worker, payload in sent:
            try:
                apply(worker, payload)
            except RuntimeError:
                rejected += 1
        apply_cpu += time.process_time() - cpu
        apply_wall += time.perf_counter() - wall

    for _, batch in decode_batches(data):
        pending.extend(batch.events)
        events += len(batch.events)
        if len(pending) >= chunk:
            flush()
    flush()
    return {
        "events": events,
        "build": {"cpu": build_cpu, "wall": build_wall},
        "apply": {"cpu": apply_cpu, "wall": apply_wall},
        "rejected": rejected,
        "not_sent": not_sent,
    }


def dynamo_available() -> bool:
    try:
        import dynamo._core  # noqa: F401
    except ImportError:
        return False
    return True


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def rate(events: int, seconds: float) -> str:
    return f"{events / seconds:,.0f}"


def report(result: dict) -> None:
    local = result["local"]
    print()
    print(benchlib.machine_line(result["machine_after"]))
    capture = result["capture"]
    print(
        f"capture: {capture['path']}, {capture['bytes']:,} bytes, "
        f"{local['batches']:,} batches, "
        f"{local['cases']['checker']['events']:,} events; checker found "
        f"{local['violations']:,} violations, {local['duplicate_stores']:,} stores "
        "of a live hash"
    )
    print()
    print(
        "| what | CPU s (median) | events/s (CPU) | wall s (median) "
        "| events/s (wall) | speed against decode alone (CPU) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    base_cpu = benchlib.median(local["cases"]["decode alone"]["cpu"])
    for name, case in local["cases"].items():
        cpu = benchlib.median(case["cpu"])
        wall = benchlib.median(case["wall"])
        print(
            f"| {name} | {cpu:.2f} | {rate(case['events'], cpu)} | {wall:.2f} "
            f"| {rate(case['events'], wall)} | {base_cpu / cpu:.3f} |"
        )
    dynamo = result.get("dynamo")
    if dynamo:
        build, apply = dynamo["build"], dynamo["apply"]
        both = build["cpu"] + apply["cpu"]
        for name, cpu, wall in (
            ("Dynamo: adapter builds the JSON events", build["cpu"], build["wall"]),
            ("Dynamo: RadixTree.apply_event alone", apply["cpu"], apply["wall"]),
            ("Dynamo: adapter and tree", both, build["wall"] + apply["wall"]),
        ):
            print(
                f"| {name} | {cpu:.2f} | {rate(dynamo['events'], cpu)} | {wall:.2f} "
                f"| {rate(dynamo['events'], wall)} | {base_cpu / cpu:.3f} |"
            )
        print()
        print(
            f"Dynamo (one run): {dynamo['rejected']:,} events rejected by the tree, "
            f"{dynamo['not_sent']:,} not sent (rule C3)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/checker_speed.py")
    parser.add_argument("--generate", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dynamo-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--capture", type=Path, default=DEFAULT_CAPTURE)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--ops", type=int, default=2000, help="per workload")
    parser.add_argument("--tree", help="the vLLM tree that makes the capture")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--dynamo-python",
        help="an interpreter with ai-dynamo-runtime, when this one lacks it",
    )
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args(argv)
    if args.generate:
        print(json.dumps(generate(args.capture, args.events, args.ops)))
        return 0
    if args.dynamo_only:
        print(json.dumps(measure_dynamo(args.capture.read_bytes())))
        return 0
    before = benchlib.machine()
    print(benchlib.machine_line(before), flush=True)
    made = None
    if not args.capture.is_file():
        made = make_capture(args)
        print(f"made: {made}", flush=True)
    data = args.capture.read_bytes()
    local = measure_local(data, args.repeats)
    dynamo = None
    if dynamo_available():
        print("Dynamo: in this interpreter", flush=True)
        dynamo = measure_dynamo(data)
    elif args.dynamo_python:
        print(f"Dynamo: under {args.dynamo_python}", flush=True)
        output = subprocess.run(
            [
                args.dynamo_python,
                str(SCRIPT),
                "--dynamo-only",
                "--capture",
                str(args.capture),
            ],
            env={**os.environ, "PYTHONPATH": str(benchlib.REPO_ROOT)},
            stdout=subprocess.PIPE,
            text=True,
            check=True,
        ).stdout
        dynamo = json.loads(output.strip().splitlines()[-1])
    else:
        print("Dynamo: not importable here and no --dynamo-python; skipped")
    result = {
        "machine_before": before,
        "machine_after": benchlib.machine(),
        "capture": {"path": str(args.capture), "bytes": len(data), "made": made},
        "local": local,
        "dynamo": dynamo,
    }
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
