"""What the series costs one call on the scheduler thread, as a ratio to the
released tree: the default tier's partial-entry ancestry (patch 0004), a
hybrid model's prefill at block / hash-block ratios of 96 and 128, and its
decode through one cache block (patch 0003's Mamba runs).

    python benchmarks/partial_entry_cost.py [--tree LABEL=PATH ...]
        [--rounds 15] [--repeat 50] [--case NAME ...] [--floor] [--json FILE]

The first tree is the baseline (default: the harness's cached trees of target
main, pristine and default). Each tree runs in a child process of its own
that stays up for the whole run. The cases are `harness.workloads.calls`'s
(its docstring says what each calls; the export quotes their lines and
bytes), at every ratio and context length, with one tail at 4 / 4096 /
8,000 tokens (``register 4x4096x8000``), and the scheduler's
(`harness.workloads.scheduler_calls`: ``scheduler step``, ``scheduler
reset``).

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

``--floor`` adds two rows per case, each timed in a child of its own inside
the baseline tree, whose ``cache_partial_block`` is wrapped to do, after the
released call, the least that any fill reporting the boundaries between the
entry's cache block start and its parent adds to it (where patch 0004 would
report them: events on, the entry new, inside its block, not in the first
block):

- ``floor: payload``: what the events must carry, built at C speed: the
  boundaries' hashes converted in one pass (``array``, byte-swapped; the
  fastest stdlib route, about 30 ns a hash against ``int.from_bytes``'s
  90), their tokens copied, one ``BlockStored`` and one ``BlockRemoved``;
- ``floor: payload + held check``: the same, after finding the boundaries
  the pool holds (each hash keyed with its group, one intersection with
  the pool's keys), which a fill needs so as not to retire a live entry.

Their lines are the wrapper's, not a design's: read their time.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import benchlib

from harness.workloads import call_cases, call_count, calls

SCRIPT = Path(__file__).resolve()

REGISTRATIONS = (*calls.REGISTRATIONS, (4, 4096, 8000))
CASES = (
    *(f"partial x{ratio}" for ratio in calls.PARTIAL_RATIOS),
    *("register {}x{}x{}".format(*shape) for shape in REGISTRATIONS),
    "8 sibling tails",
    *("prefill {}x{}x{}".format(*shape) for shape in calls.PREFILLS),
    *(f"decode {n}k" for n in calls.DECODE_CONTEXTS),
    *(f"decode {n}k, unaligned prefill" for n in (16, 64)),
    *calls.MASKED,
    "partial x128" + calls.EVENTS_OFF,
    "register 16x2048x4000" + calls.EVENTS_OFF,
    "masked 64/4" + calls.EVENTS_OFF,
    *(
        f"scheduler {call}{off}"
        for call in ("step", "reset")
        for off in ("", calls.EVENTS_OFF)
    ),
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


FLOORS = {"floor: payload": False, "floor: payload + held check": True}


def install_floor(held_check: bool) -> None:
    """Wrap ``BlockPool.cache_partial_block`` with a floor (module docstring)."""
    import itertools
    import operator
    from array import array

    from vllm.distributed.kv_events import BlockRemoved, BlockStored
    from vllm.v1.core.block_pool import BlockPool

    released = getattr(BlockPool, "cache_partial_block", None)
    if released is None:  # the cases say Unsupported
        return

    def cache_partial_block(
        self, request, block, num_tokens, group_id, block_size, *args, **kwargs
    ):
        queued = len(self.kv_event_queue)
        key = released(
            self, request, block, num_tokens, group_id, block_size, *args, **kwargs
        )
        hash_block_size = self.hash_block_size
        first = (num_tokens - 1) // block_size * block_size // hash_block_size
        last = num_tokens // hash_block_size - 1
        if (
            len(self.kv_event_queue) == queued  # events off, or already cached
            or first in (0, last)
            or num_tokens % block_size == 0
        ):
            return key
        # The block start (the run's parent), then each boundary up to the
        # entry's parent.
        hashes = request.block_hashes[first - 1 : last]
        if held_check:
            suffix = group_id.to_bytes(4, "big")
            keys = list(map(operator.add, hashes, itertools.repeat(suffix)))
            self.cached_block_hash_to_block._cache.keys() & keys
        # vLLM's external hash is the low 64 bits of the big-endian hash.
        words = array("Q", b"".join(hashes))
        if sys.byteorder == "little":
            words.byteswap()
        step = len(hashes[0]) // 8
        external = words[step - 1 :: step].tolist()
        self.kv_event_queue.append(
            BlockStored(
                block_hashes=external[1:],
                parent_block_hash=external[0],
                token_ids=request.all_token_ids[
                    first * hash_block_size : last * hash_block_size
                ],
                block_size=hash_block_size,
                lora_id=None,
                medium=self.medium,
                lora_name=None,
                group_idx=group_id,
            )
        )
        self.kv_event_queue.append(
            BlockRemoved(
                block_hashes=external[:0:-1], medium=self.medium, group_idx=group_id
            )
        )
        return key

    BlockPool.cache_partial_block = cache_partial_block


def child() -> int:
    call_count.as_the_engine_runs()
    built: dict = {}
    for request, reply in benchlib.serve_requests():
        try:
            if "floor" in request and not built:
                install_floor(FLOORS[request["floor"]])
            case = request["case"]
            if case not in built:
                built[case] = call_cases.build(case)
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
    # A floor is the baseline tree with its call wrapped (install_floor).
    floors = dict.fromkeys(FLOORS if args.floor else (), next(iter(trees.values())))
    trees = {**trees, **floors}
    labels = list(trees)

    def request(label: str, case: str, **more) -> dict:
        return {"case": case, **more, **({"floor": label} if label in floors else {})}

    counted = {label: {} for label in labels}
    times: dict[str, dict[str, list[float]]] = {
        label: {case: [] for case in cases} for label in labels
    }
    with benchlib.children(SCRIPT, trees, "partial-entry-cost-") as children:
        for case in cases:
            for label in labels:
                counted[label][case] = children[label].ask(request(label, case))
        for index in range(args.rounds):
            order = labels[index % len(labels) :] + labels[: index % len(labels)]
            for case in cases:
                for label in order:
                    reply = children[label].ask(
                        request(label, case, repeat=args.repeat)
                    )
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


HELD_FLOOR = "floor: payload + held check"


def report(result: dict) -> None:
    labels = list(result["trees"])
    base = labels[0]
    # Beside a floor, each tree's time is also a ratio to the floor with the
    # held check, per round: the least any fill of the boundaries adds.
    floor = HELD_FLOOR if HELD_FLOOR in labels else None
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
        + (" to the floor with the held check, median (min-max) |" if floor else "")
    )
    print("| --- | --- |" + " ---: |" * (8 if floor else 7))
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
            if floor:
                floor_us = result["us"][floor][case]
                to_floor = [a / b for a, b in zip(us, floor_us, strict=True)]
                held = label in (base, floor) or label.startswith("floor")
                cells.append("-" if held else benchlib.spread(to_floor))
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
    parser.add_argument(
        "--floor",
        action="store_true",
        help="add the least any fill adds to the baseline's partial entries "
        "(two more rows per case: see the module docstring)",
    )
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    return benchlib.run_main(parser.parse_args(argv), child, run, report)


if __name__ == "__main__":
    sys.exit(main())
