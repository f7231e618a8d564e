"""Upstream's design for vLLM #58119 beside this project's tiers, measured
with the same workloads and checks (docs/upstream-designs.md).

    python benchmarks/upstream_designs.py --tree pristine=$P --tree default=$D \
        --tree strict=$S --tree upstream=$U [--config NAME ...] [--seeds 3] \
        [--ops 300] [--probes 4] [--tests NAME ...] [--json FILE]

The first ``--tree`` is the baseline (vLLM as released); ``upstream`` is
patches/alternatives/upstream-44488-58121.patch applied to it, a benchmark
input that is no tier. What is measured, and the two consumers that read
each run's stream (one ignoring the ``skipped_*`` fields, one reading
them), are harness.routers.designs's, which `export` also runs for a
comment on an upstream pull request: per consumer the stream checker's
findings per rule (C1-C6, docs/contract.md) and per class (K1-K7), and the
content-tree router's predictions against the engine's own lookup
(exact, over, under); per tree its events, their bytes, and the
baseline's events it does not emit byte for byte (C7). ``--tests NAME``
also runs target main's CI selection of vLLM's tests in tree NAME, as `python -m harness
test` runs them. Prints a markdown table; ``--json`` writes the figures for
harness/submission/upstream_designs.py, which quotes them in pr-body.md.

Runs in an environment with vLLM's requirements (.tox/vllm-main).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from collections import Counter
from pathlib import Path

from benchlib import REPO_ROOT, add_tree_argument, machine, machine_line, parse_trees

from harness.routers import DEFAULT_OPS, DEFAULT_PROBES, DEFAULT_SEEDS
from harness.routers.designs import CONSUMERS, TreeFigures, measure_trees
from harness.workloads.drivers import CONFIGS


def run_tests(tree: Path, name: str) -> dict[str, int]:
    from harness.suites.upstream import run_upstream
    from harness.targets import get_target

    outcomes = run_upstream(tree, get_target("main").selection("ci"), "2", name)
    return dict(Counter(outcomes.values()))


def render(figures: dict[str, TreeFigures]) -> str:
    lines = [
        "| tree | events | bytes per event | release events not kept byte for "
        "byte | consumer | parents not live (C1) | span mismatches (C3) | "
        "router exact % | over | under | vLLM's tests passed / failed |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for tree, found in figures.items():
        for name in CONSUMERS:
            router = found.router[name]
            tests = found.tests
            lines.append(
                f"| {tree} | {found.events} | {found.bytes / found.events:.1f} | "
                f"{found.changed} | {name} skipped_* | {found.rules[name]['C1']} | "
                f"{found.rules[name]['C3']} | {router.exact_pct:.1f} | "
                f"{router.over} | {router.under} | "
                + (
                    f"{tests.get('passed', 0)} / "
                    f"{tests.get('failed', 0) + tests.get('error', 0)}"
                    if tests
                    else "-"
                )
                + " |"
            )
    return "\n".join(lines)


def revision() -> str:
    try:
        found = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        return found.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> int:
    from harness.targets import get_target

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_tree_argument(parser)
    parser.add_argument("--config", dest="configs", action="append", choices=CONFIGS)
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS)
    parser.add_argument("--ops", type=int, default=DEFAULT_OPS)
    parser.add_argument("--probes", type=int, default=DEFAULT_PROBES)
    parser.add_argument(
        "--tests",
        action="append",
        default=[],
        metavar="NAME",
        help="also run vLLM's CI selection in tree NAME",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    trees = parse_trees(args.tree, ("default", "strict"))
    configs = args.configs or list(CONFIGS)
    started = time.monotonic()
    info = machine()
    figures = measure_trees(trees, configs, args.seeds, args.ops, args.probes)
    for name in args.tests:
        figures[name].tests = run_tests(trees[name], name)
    print(machine_line(info))
    print(
        f"{len(configs)} configs x {args.seeds} seeds x {args.ops} operations, "
        f"{args.probes} probes per quiet point; {time.monotonic() - started:.0f} s"
    )
    print(render(figures))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "target": "main",
                    "release": get_target("main").source.release_name(),
                    "measured": time.strftime("%Y-%m-%d", time.gmtime()),
                    "revision": revision(),
                    "machine": info,
                    "workloads": {
                        "configs": configs,
                        "seeds": args.seeds,
                        "ops": args.ops,
                        "probes": args.probes,
                    },
                    "trees": {name: found.as_json() for name, found in figures.items()},
                },
                indent=1,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
