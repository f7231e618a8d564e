"""How much the series grows the KV-event stream: extra events and bytes per
partial registration and per 1,000 operations, per (hash_block_size,
block_size), pristine against the patched tiers; and what one prompt's
registration costs.

    python benchmarks/stream_growth.py [--tree LABEL=PATH ...] [--seeds 5]
        [--ops 1000] [--repeat 200] [--only workloads|registrations]
        [--config NAME ...] [--json FILE]

The first tree is the baseline (default: the harness's cached trees of target
main, pristine, default and strict). Each tree runs the BlockPool drivers of
``harness.workloads.drivers`` (pool-128x1536, pool-2x6, pool-4x12,
pool-16x64; ``--config`` names others, the KVCacheManager ones too, which
call the pool as the engine's managers do under the scheduler's Mamba
split) in a child process of its own: per seed, ``--ops`` seeded operations
and then one that evicts everything, the events taken after each operation
and encoded as the engine's publisher does (one ``KVEventBatch`` per
operation that emitted any, vLLM's msgspec encoder; ZMQ's topic and
sequence frames not counted).

The workloads make the same pool calls in every tree (the series changes no
lookup and no allocation; the script checks that the operation sequences
match), so a *partial registration* is a ``cache_partial_block`` call that
emitted its entry's store, counted in the baseline tree: one
``BlockStored`` labelled ``partial:*`` there. Extra events and bytes are the
patched tree's minus the baseline's over the same operations.

One registration: a prompt (1,800 tokens at 128x1536, 4,000 at 16x1536 and
16x2048) cached in a fresh pool as the scheduler caches a prompt (its full
blocks, then its tail as a partial entry at the last hash boundary before
the prompt's end), then evicted. Per tree: the events and wire bytes of each
half, the Python lines the registration executes (``sys.settrace``, after a
warm-up registration in another pool, so one-time imports and caches are
not counted), and its wall time (median of ``--repeat`` registrations, each
in a fresh pool).

No figure is asserted; the script only prints.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import benchlib

from harness.workloads import call_count, calls
from harness.workloads.drivers import CONFIGS as DRIVERS

SCRIPT = Path(__file__).resolve()
CONFIGS = ("pool-128x1536", "pool-2x6", "pool-4x12", "pool-16x64")


# --------------------------------------------------------------------------
# Child: runs inside one tree
# --------------------------------------------------------------------------


def measure(config: str, seed: int, ops: int) -> dict:
    import msgspec
    from vllm.distributed.kv_events import BlockRemoved, BlockStored, KVEventBatch

    from harness.workloads.drivers import evict_everything
    from harness.workloads.workloads import build

    driver, labeller = build(config, seed)
    take = driver.pool.take_events
    encoder = msgspec.msgpack.Encoder()
    names = hashlib.sha256()
    figures: Counter = Counter()
    partial: Counter = Counter()

    def tally(index: int) -> None:
        events = labeller.take(take())
        if not events:
            return
        figures["batches"] += 1
        figures["wire_bytes"] += len(
            encoder.encode(
                KVEventBatch(ts=float(index), events=[event for _, event in events])
            )
        )
        for label, event in events:
            figures["events"] += 1
            figures["event_bytes"] += len(encoder.encode(event))
            if isinstance(event, BlockStored):
                figures["stores"] += 1
                if label.startswith("partial:"):
                    partial[label.split("@")[0].split(":")[1]] += 1
            elif isinstance(event, BlockRemoved):
                figures["removals"] += 1
            else:
                figures["clears"] += 1

    for index in range(ops):
        names.update(driver.step().encode() + b"\0")
        tally(index)
    evict_everything(driver)
    tally(ops)
    return {
        "figures": dict(figures),
        "partial_stores": dict(partial),
        "ops_digest": names.hexdigest(),
    }


def registration(hash_block_size: int, block_size: int, tokens: int, repeat: int):
    import msgspec
    from vllm.distributed.kv_events import KVEventBatch

    fresh, register, evict = calls.prompt_registration(
        hash_block_size, block_size, tokens
    )
    encoder = msgspec.msgpack.Encoder()

    def wire(events) -> list[int]:
        return [len(events), len(encoder.encode(KVEventBatch(ts=0.0, events=events)))]

    warm_pool, warm_blocks = fresh()
    register(warm_pool, warm_blocks)
    evict(warm_pool, warm_blocks)
    pool, blocks = fresh()
    figures = {"register_lines": call_count.traced_lines(register, pool, blocks)}
    figures["register"] = wire(pool.take_events())
    figures["evict_lines"] = call_count.traced_lines(evict, pool, blocks)
    figures["evict"] = wire(pool.take_events())
    times = []
    for _ in range(repeat):
        pool, blocks = fresh()
        started = time.perf_counter()
        register(pool, blocks)
        times.append(time.perf_counter() - started)
    figures["register_us"] = statistics.median(times) * 1e6
    return figures


def child() -> int:
    call_count.as_the_engine_runs()
    for request, reply in benchlib.serve_requests():
        try:
            if "registration" in request:
                reply(registration(*request["registration"], request["repeat"]))
                continue
            reply(measure(request["config"], request["seed"], request["ops"]))
        except Exception as exc:  # reported to the parent, which stops
            reply({"error": f"{type(exc).__name__}: {exc}"})
    return 0


# --------------------------------------------------------------------------
# Parent
# --------------------------------------------------------------------------

FIGURES = ("events", "stores", "removals", "clears", "wire_bytes", "event_bytes")


def run(args) -> dict:
    trees = benchlib.parse_trees(args.tree, ("default", "strict"))
    configs = args.config or list(CONFIGS)
    before = benchlib.machine()
    print(benchlib.machine_line(before), flush=True)
    for label, tree in trees.items():
        print(f"tree {label}: {tree}", flush=True)
    runs: dict[str, dict[str, list]] = {
        label: {config: [] for config in configs} for label in trees
    }
    registrations: dict[str, dict[str, dict]] = {label: {} for label in trees}
    with benchlib.children(SCRIPT, trees, "stream-growth-") as children:
        for shape in calls.REGISTRATIONS if args.only != "workloads" else ():
            for label, child_process in children.items():
                registrations[label]["x".join(map(str, shape))] = child_process.ask(
                    {"registration": shape, "repeat": args.repeat}
                )
        for config in configs if args.only != "registrations" else ():
            for seed in range(args.seeds):
                for label, child_process in children.items():
                    runs[label][config].append(
                        child_process.ask(
                            {"config": config, "seed": seed, "ops": args.ops}
                        )
                    )
            print(f"{config}: {args.seeds} seeds done", flush=True)
    return {
        "machine_before": before,
        "machine_after": benchlib.machine(),
        "trees": {label: str(tree) for label, tree in trees.items()},
        "seeds": args.seeds,
        "ops": args.ops,
        "runs": runs,
        "registrations": registrations,
    }


def summed(replies: list[dict], key: str) -> Counter:
    total: Counter = Counter()
    for reply in replies:
        total.update(reply[key])
    return total


def report_registrations(result: dict) -> None:
    labels = list(result["trees"])
    base = result["registrations"][labels[0]]
    if not base:
        return
    print()
    print(
        "One prompt registered, then evicted (events / wire bytes of each "
        "half; lines and time of the registration)"
    )
    print()
    print(
        "| hbs x block x tokens | tree | register: events / bytes | evict: events "
        "/ bytes | lines | lines ratio | us (median) | time ratio |"
    )
    print("| --- | --- |" + " ---: |" * 6)
    for shape in base:
        for label in labels:
            figures = result["registrations"][label][shape]
            cells = [
                shape,
                label,
                "{:,} / {:,}".format(*figures["register"]),
                "{:,} / {:,}".format(*figures["evict"]),
                f"{figures['register_lines']:,}",
                f"{figures['register_lines'] / base[shape]['register_lines']:.2f}",
                f"{figures['register_us']:,.0f}",
                f"{figures['register_us'] / base[shape]['register_us']:.2f}",
            ]
            print("| " + " | ".join(cells) + " |")


def report(result: dict) -> None:
    report_registrations(result)
    if not any(result["runs"][label] for label in result["runs"]) or not any(
        replies for replies in next(iter(result["runs"].values())).values()
    ):
        return
    labels = list(result["trees"])
    base = labels[0]
    seeds, ops = result["seeds"], result["ops"]
    total_ops = seeds * ops
    print()
    print(benchlib.machine_line(result["machine_after"]))
    print(
        f"{seeds} seeds x {ops} operations per config (+1 evict-everything "
        "operation each, whose events are counted)"
    )
    print()
    print(
        "| hbs x block | tree | events | stores / removals | wire bytes "
        "| partial registrations | extra events / registration "
        "| extra bytes / registration | extra events / 1k ops "
        "| extra bytes / 1k ops | events ratio | bytes ratio |"
    )
    print("| --- | --- |" + " ---: |" * 10)
    mismatched = []
    for config in result["runs"][base]:
        shape = config.removeprefix("pool-")
        baseline = result["runs"][base][config]
        base_figures = summed(baseline, "figures")
        registrations = sum(summed(baseline, "partial_stores").values())
        for label in labels:
            replies = result["runs"][label][config]
            if [r["ops_digest"] for r in replies] != [
                r["ops_digest"] for r in baseline
            ]:
                mismatched.append(f"{label} {config}")
            figures = summed(replies, "figures")
            extra_events = figures["events"] - base_figures["events"]
            extra_bytes = figures["wire_bytes"] - base_figures["wire_bytes"]
            cells = [
                shape,
                label,
                f"{figures['events']:,}",
                f"{figures['stores']:,} / {figures['removals']:,}",
                f"{figures['wire_bytes']:,}",
            ]
            if label == base:
                kinds = summed(baseline, "partial_stores")
                detail = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
                cells += [f"{registrations:,} ({detail})"] + ["-"] * 6
            else:
                cells += [
                    "",
                    f"{extra_events / registrations:.2f}" if registrations else "-",
                    f"{extra_bytes / registrations:,.0f}" if registrations else "-",
                    f"{extra_events / total_ops * 1000:,.1f}",
                    f"{extra_bytes / total_ops * 1000:,.0f}",
                    f"{figures['events'] / base_figures['events']:.3f}",
                    f"{figures['wire_bytes'] / base_figures['wire_bytes']:.3f}",
                ]
            print("| " + " | ".join(cells) + " |")
    print()
    if mismatched:
        print("operation sequences DIFFER from the baseline: " + ", ".join(mismatched))
    else:
        print("operation sequences identical in every tree (same pool calls)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/stream_growth.py")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    benchlib.add_tree_argument(parser)
    parser.add_argument(
        "--config",
        action="append",
        choices=list(DRIVERS),
        help="a driver to run (repeat; default: the four BlockPool drivers)",
    )
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument(
        "--repeat", type=int, default=200, help="timed registrations per tree"
    )
    parser.add_argument(
        "--only", choices=("workloads", "registrations"), help="run one part"
    )
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    return benchlib.run_main(parser.parse_args(argv), child, run, report)


if __name__ == "__main__":
    sys.exit(main())
