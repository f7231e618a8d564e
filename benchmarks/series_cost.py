"""What the series costs the scheduler: patched against pristine, events on
and off, on a seeded op mix over BlockPool and KVCacheManager.

    python benchmarks/series_cost.py [--tree LABEL=PATH ...] [--rounds 9]
        [--seeds 3] [--ops 300] [--json FILE]

The first tree is the baseline (default: the harness's cached trees of target
main, pristine, default and strict). Each tree runs in a child process of its
own (``PYTHONPATH=<tree>:<repo> VLLM_TARGET_DEVICE=cpu PYTHONHASHSEED=0``)
that stays up for the whole run, so the trees are interleaved: every round
asks each child in turn (rotating who goes first) for one pass with events
off and one with events on (alternating which comes first).

A pass runs every driver of ``harness.workloads.drivers.CONFIGS`` (four BlockPool
configs, three KVCacheManager configs) for each seed: build the driver (not
timed), then ``--ops`` steps, each followed by ``take_events()`` as the
engine's scheduler does, then evict everything (timed). Events off builds
the same drivers with ``enable_kv_cache_events=False`` (the flag is forced on
``BlockPool`` and ``KVCacheManager`` construction).

Two figures per tree and events setting, as a ratio to the baseline:

- CPU time (``time.process_time``) of a pass: median over the rounds of the
  per-round ratio, with min-max; noisy on a shared machine;
- Python lines executed in a pass (``sys.settrace``, ``line`` events), counted
  once per tree and setting and again to show it repeats exactly; the
  primary figure. Lines inside ``vllm/v1/core`` are also given on their
  own, and the functions whose line counts differ most from the baseline
  say where the cost goes.

No figure is asserted; the script only prints.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import random
import sys
import time
from collections import Counter
from pathlib import Path

import benchlib

from harness.workloads import call_count

SCRIPT = Path(__file__).resolve()


# --------------------------------------------------------------------------
# Child: runs inside one tree
# --------------------------------------------------------------------------


@contextlib.contextmanager
def kv_events(enabled: bool):
    """Force ``enable_kv_cache_events`` on BlockPool and KVCacheManager."""
    from vllm.v1.core.block_pool import BlockPool
    from vllm.v1.core.kv_cache_manager import KVCacheManager

    originals = {cls: cls.__init__ for cls in (BlockPool, KVCacheManager)}

    def forcing(original):
        def init(self, *args, **kwargs):
            kwargs["enable_kv_cache_events"] = enabled
            original(self, *args, **kwargs)

        return init

    for cls, original in originals.items():
        cls.__init__ = forcing(original)
    try:
        yield
    finally:
        for cls, original in originals.items():
            cls.__init__ = original


def driver_kind(config: str) -> str:
    return config.split("-", 1)[0]  # "pool" or "manager"


def one_pass(
    configs: list[str], seeds: list[int], ops: int, events: bool, tracer=None
) -> dict:
    """Run the mix once; CPU seconds per driver kind and events taken."""
    from harness.workloads.drivers import CONFIGS, evict_everything

    seconds: Counter = Counter()
    taken = 0
    for config in configs:
        for seed in seeds:
            with kv_events(events):
                driver = CONFIGS[config](random.Random(seed))
            take = getattr(driver, "manager", driver.pool).take_events
            gc.collect()
            started = time.process_time()
            if tracer is not None:
                sys.settrace(tracer)
            for _ in range(ops):
                driver.step()
                taken += len(take())
            evict_everything(driver)
            taken += len(take())
            if tracer is not None:
                sys.settrace(None)
            seconds[driver_kind(config)] += time.process_time() - started
    return {"seconds": dict(seconds), "events": taken}


def count_lines(configs, seeds, ops, events) -> dict:
    """Lines executed in one pass, per code object, folded into areas and
    functions."""
    per_code: Counter = Counter()

    def local(frame, event, arg):
        if event == "line":
            per_code[frame.f_code] += 1
        return local

    def tracer(frame, event, arg):
        frame.f_trace_lines = True
        return local

    per_config: dict[str, int] = {}
    taken = 0
    for config in configs:
        before = sum(per_code.values())
        taken += one_pass([config], seeds, ops, events, tracer)["events"]
        per_config[config] = sum(per_code.values()) - before
    import vllm

    vllm_root = str(Path(vllm.__file__).resolve().parent) + "/"
    repo_root = str(benchlib.REPO_ROOT) + "/"
    areas: Counter = Counter()
    functions: Counter = Counter()
    for code, count in per_code.items():
        filename = code.co_filename
        if filename.startswith(vllm_root):
            relative = "vllm/" + filename[len(vllm_root) :]
            functions[f"{relative}:{code.co_qualname}"] += count
            if relative == "vllm/v1/core/block_pool.py":
                areas["vllm/v1/core/block_pool.py"] += count
            elif relative.startswith("vllm/v1/core/"):
                areas["vllm/v1/core (rest)"] += count
            else:
                areas["vllm (rest)"] += count
        elif filename.startswith(repo_root):
            areas["harness driver"] += count
        else:
            areas["stdlib and packages"] += count
    return {
        "lines": sum(areas.values()),
        "areas": dict(areas),
        "functions": dict(functions),
        "per_config": per_config,
        "events": taken,
    }


def child() -> int:
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import init_none_hash

    init_none_hash(sha256)
    call_count.as_the_engine_runs()
    for request, reply in benchlib.serve_requests():
        try:
            args = (request["configs"], request["seeds"], request["ops"])
            if request["mode"] == "time":
                reply(one_pass(*args, request["events"]))
            else:
                reply(count_lines(*args, request["events"]))
        except Exception as exc:  # reported to the parent, which stops
            reply({"error": f"{type(exc).__name__}: {exc}"})
    return 0


# --------------------------------------------------------------------------
# Parent
# --------------------------------------------------------------------------

SETTINGS = (("off", False), ("on", True))


def run(args) -> dict:
    from harness.workloads.drivers import CONFIGS

    trees = benchlib.parse_trees(args.tree, ("default", "strict"))
    labels = list(trees)
    configs = args.config or list(CONFIGS)
    mix = {"configs": configs, "seeds": list(range(args.seeds)), "ops": args.ops}
    before = benchlib.machine()
    print(benchlib.machine_line(before), flush=True)
    for label, tree in trees.items():
        print(f"tree {label}: {tree}", flush=True)
    print(
        f"mix: {len(configs)} drivers x {args.seeds} seeds x {args.ops} ops; "
        f"{args.rounds} rounds",
        flush=True,
    )
    loads = []
    with benchlib.children(
        SCRIPT, trees, "series-cost-", PYTHONHASHSEED="0"
    ) as children:
        # Warm up: imports, first-call caches.
        for child_process in children.values():
            for _, events in SETTINGS:
                child_process.ask({"mode": "time", "events": events, **mix})
        times = {(label, name): [] for label in labels for name, _ in SETTINGS}
        for round_index in range(args.rounds):
            order = (
                labels[round_index % len(labels) :]
                + labels[: round_index % len(labels)]
            )
            settings = SETTINGS if round_index % 2 == 0 else SETTINGS[::-1]
            for label in order:
                for name, events in settings:
                    reply = children[label].ask(
                        {"mode": "time", "events": events, **mix}
                    )
                    times[label, name].append(reply)
            loads.append(benchlib.load_average()[0])
            print(f"round {round_index + 1}/{args.rounds} done", flush=True)
        counts = {}
        if not args.no_count:
            for label in labels:
                for name, events in SETTINGS:
                    started = time.monotonic()
                    request = {"mode": "count", "events": events, **mix}
                    first = children[label].ask(request)
                    if args.count_twice:
                        again = children[label].ask(request)
                        first["repeats"] = again["functions"] == first["functions"]
                    counts[label, name] = first
                    print(
                        f"counted {label}, events {name}: {first['lines']:,} lines "
                        f"({time.monotonic() - started:.0f} s)",
                        flush=True,
                    )
    after = benchlib.machine()
    return {
        "machine_before": before,
        "machine_after": after,
        "load_1min_per_round": loads,
        "trees": {label: str(tree) for label, tree in trees.items()},
        "mix": mix,
        "times": {f"{label}/{name}": value for (label, name), value in times.items()},
        "counts": {f"{label}/{name}": value for (label, name), value in counts.items()},
    }


def total(reply: dict, kind: str | None = None) -> float:
    seconds = reply["seconds"]
    return seconds[kind] if kind else sum(seconds.values())


def core_lines(counts: dict) -> int:
    return sum(
        v for area, v in counts["areas"].items() if area.startswith("vllm/v1/core")
    )


def report(result: dict, top: int) -> None:
    labels = list(result["trees"])
    base = labels[0]
    times, counts = result["times"], result["counts"]
    print()
    print(benchlib.machine_line(result["machine_after"]))
    loads = result["load_1min_per_round"]
    print(
        "1-minute load average after each round: "
        + " ".join(f"{value:.2f}" for value in loads)
    )
    print()
    print(
        "| tree | events | CPU s/pass (median) | CPU ratio (min-max) "
        "| CPU ratio, pool | CPU ratio, manager | lines/pass | lines ratio "
        "| vllm/v1/core lines ratio |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label in labels:
        for name, _ in SETTINGS:
            key, base_key = f"{label}/{name}", f"{base}/{name}"
            passes = [total(reply) for reply in times[key]]
            cells = [label, name, f"{benchlib.median(passes):.3f}"]
            for kind in (None, "pool", "manager"):
                if kind is not None and kind not in times[key][0]["seconds"]:
                    cells.append("-")  # the mix ran no driver of this kind
                    continue
                ratios = [
                    total(reply, kind) / total(baseline, kind)
                    for reply, baseline in zip(times[key], times[base_key], strict=True)
                ]
                cells.append(
                    benchlib.spread(ratios)
                    if kind is None
                    else f"{benchlib.median(ratios):.3f}"
                )
            if key in counts:
                lines, base_lines = counts[key], counts[base_key]
                cells += [
                    f"{lines['lines']:,}",
                    f"{lines['lines'] / base_lines['lines']:.4f}",
                    f"{core_lines(lines) / core_lines(base_lines):.4f}",
                ]
            else:
                cells += ["-", "-", "-"]
            print("| " + " | ".join(cells) + " |")
    if not counts:
        return
    repeats = [value.get("repeats") for value in counts.values()]
    if None not in repeats:
        print()
        print(
            "line counts, each taken twice: "
            + ("every count repeated exactly" if all(repeats) else "SOME DIFFERED")
        )
    configs = result["mix"]["configs"]
    print()
    print("lines ratio per driver (events off / on):")
    print()
    print("| tree | " + " | ".join(configs) + " |")
    print("| --- |" + " ---: |" * len(configs))
    for label in labels[1:]:
        cells = [label]
        for config in configs:
            pair = []
            for name, _ in SETTINGS:
                lines = counts[f"{label}/{name}"]["per_config"][config]
                pair.append(lines / counts[f"{base}/{name}"]["per_config"][config])
            cells.append(" / ".join(f"{value:.3f}" for value in pair))
        print("| " + " | ".join(cells) + " |")
    for label in labels[1:]:
        for name, _ in SETTINGS:
            lines = counts[f"{label}/{name}"]
            base_lines = counts[f"{base}/{name}"]
            print()
            print(
                f"{label}, events {name}: {lines['lines'] - base_lines['lines']:+,} "
                f"lines over {base} ({lines['events']:,} events taken against "
                f"{base_lines['events']:,}); by area:"
            )
            for area in sorted(set(lines["areas"]) | set(base_lines["areas"])):
                delta = lines["areas"].get(area, 0) - base_lines["areas"].get(area, 0)
                print(f"  {area}: {delta:+,}")
            deltas = Counter(lines["functions"])
            deltas.subtract(base_lines["functions"])
            changed = [item for item in deltas.most_common() if item[1]]
            if changed:
                print(f"  functions, most lines added first (top {top}):")
                for function, delta in changed[:top]:
                    print(f"    {delta:+,}  {function}")
                for function, delta in [item for item in changed if item[1] < 0][:3]:
                    print(f"    {delta:+,}  {function}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/series_cost.py")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    benchlib.add_tree_argument(parser)
    parser.add_argument("--config", action="append", help="a workload config (repeat)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--ops", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--no-count", action="store_true", help="skip the line counts")
    parser.add_argument(
        "--count-twice",
        action="store_true",
        help="count each setting twice and say whether the counts repeat",
    )
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args(argv)
    return benchlib.run_main(args, child, run, lambda result: report(result, args.top))


if __name__ == "__main__":
    sys.exit(main())
