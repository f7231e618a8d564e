"""What the series costs one call on the scheduler thread, as a ratio to the
released tree: the default tier's partial-entry ancestry (patch 0004), and a
hybrid model's decode through one cache block (patch 0003's Mamba runs).

    python benchmarks/partial_entry_cost.py [--tree LABEL=PATH ...]
        [--rounds 15] [--repeat 50] [--case NAME ...] [--json FILE]

The first tree is the baseline (default: the harness's cached trees of target
main, pristine and default). Each tree runs in a child process of its own
that stays up for the whole run. The cases are `harness.workloads.calls`'s
(its docstring says what each calls; the export quotes their lines and
bytes), at every ratio and context length, with one tail at 4 / 4096 /
8,000 tokens (``register 4x4096x8000``).

Two figures per case and tree, each as a ratio to the baseline:

- Python lines the measured calls execute (``sys.settrace``, after a warm-up
  call), counted twice in fresh pools to show the count repeats;
- CPU time (``time.process_time``) of ``--repeat`` calls, each in a fresh
  pool prepared beforehand, per call; ``--rounds`` rounds, every round asks
  each child in turn (rotating who goes first), and the figure is the median
  of the per-round ratios, with min-max.

The events each call emits and their bytes on the wire (one
``KVEventBatch``, vLLM's msgspec encoder) are printed beside them. No figure
is asserted; the script only prints.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import benchlib

from harness.workloads import call_count, calls

SCRIPT = Path(__file__).resolve()

REGISTRATIONS = (*calls.REGISTRATIONS, (4, 4096, 8000))
CASES = (
    *(f"partial x{ratio}" for ratio in calls.PARTIAL_RATIOS),
    *("register {}x{}x{}".format(*shape) for shape in REGISTRATIONS),
    "8 sibling tails",
    *(f"decode {n}k" for n in calls.DECODE_CONTEXTS),
    *(f"decode {n}k, unaligned prefill" for n in (16, 64)),
    "partial x128" + calls.EVENTS_OFF,
    "register 16x2048x4000" + calls.EVENTS_OFF,
)


# --------------------------------------------------------------------------
# Child: runs inside one tree
# --------------------------------------------------------------------------


def cpu_time(fresh, call, repeat: int) -> dict:
    prepared = [fresh() for _ in range(repeat)]
    gc.collect()
    started = time.process_time()
    for args in prepared:
        call(*args)
    return {"us": (time.process_time() - started) / repeat * 1e6}


def child() -> int:
    call_count.as_the_engine_runs()
    built: dict = {}
    for request, reply in benchlib.serve_requests():
        try:
            case = request["case"]
            if case not in built:
                built[case] = calls.build(case)
            if "repeat" in request:
                reply(cpu_time(*built[case], request["repeat"]))
            else:
                reply(call_count.count(*built[case]))
        except Exception as exc:  # reported to the parent, which stops
            reply({"error": f"{type(exc).__name__}: {exc}"})
    return 0


# --------------------------------------------------------------------------
# Parent
# --------------------------------------------------------------------------


def run(args) -> dict:
    trees = benchlib.parse_trees(args.tree, ("default",))
    cases = args.case or list(CASES)
    before = benchlib.machine()
    print(benchlib.machine_line(before), flush=True)
    for label, tree in trees.items():
        print(f"tree {label}: {tree}", flush=True)
    labels = list(trees)
    counted = {label: {} for label in labels}
    times: dict[str, dict[str, list[float]]] = {
        label: {case: [] for case in cases} for label in labels
    }
    with benchlib.children(SCRIPT, trees, "partial-entry-cost-") as children:
        for case in cases:
            for label in labels:
                counted[label][case] = children[label].ask({"case": case})
        for index in range(args.rounds):
            order = labels[index % len(labels) :] + labels[: index % len(labels)]
            for case in cases:
                for label in order:
                    reply = children[label].ask({"case": case, "repeat": args.repeat})
                    times[label][case].append(reply["us"])
            print(f"round {index + 1}/{args.rounds} done", flush=True)
    return {
        "machine_before": before,
        "machine_after": benchlib.machine(),
        "trees": {label: str(tree) for label, tree in trees.items()},
        "rounds": args.rounds,
        "repeat": args.repeat,
        "lines": counted,
        "us": times,
    }


def report(result: dict) -> None:
    labels = list(result["trees"])
    base = labels[0]
    print()
    print(benchlib.machine_line(result["machine_after"]))
    print(
        f"{result['rounds']} interleaved rounds of {result['repeat']} calls per "
        f"case and tree; ratios to {base}"
    )
    print()
    print(
        "| case | tree | events | bytes | bytes ratio | lines (twice) | lines ratio "
        "| us per call (median) | time ratio, median (min-max) |"
    )
    print("| --- | --- |" + " ---: |" * 7)
    for case in result["lines"][base]:
        base_lines = result["lines"][base][case]["lines"][0]
        base_bytes = result["lines"][base][case]["bytes"][0]
        base_us = result["us"][base][case]
        for label in labels:
            counted = result["lines"][label][case]
            us = result["us"][label][case]
            ratios = [mine / theirs for mine, theirs in zip(us, base_us, strict=True)]
            cells = [
                case,
                label,
                str(counted["events"][0]),
                f"{counted['bytes'][0]:,}",
                f"{counted['bytes'][0] / base_bytes:.2f}" if base_bytes else "-",
                " / ".join(f"{count:,}" for count in counted["lines"]),
                f"{counted['lines'][0] / base_lines:.2f}",
                f"{benchlib.median(us):,.1f}",
                "-" if label == base else benchlib.spread(ratios),
            ]
            print("| " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/partial_entry_cost.py")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    benchlib.add_tree_argument(parser)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--repeat", type=int, default=50, help="timed calls per case, tree, round"
    )
    parser.add_argument("--case", action="append", choices=CASES)
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    return benchlib.run_main(parser.parse_args(argv), child, run, report)


if __name__ == "__main__":
    sys.exit(main())
