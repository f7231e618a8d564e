"""Conformance suite set-up: the two trees, their workload workers, and the
class counts (and the router fidelity of the workloads run with probes)
printed side by side at the end of the session.

The harness runs this suite with:

- HARNESS_PRISTINE_TREE, HARNESS_PATCHED_TREE  vLLM source trees (required)
- HARNESS_TIER                                 default | strict (default: default)
- HARNESS_TARGET                               the target of harness/targets.toml
                                               (default: main); its `fixes` say
                                               which classes the tier fixes
- HARNESS_CONFORMANCE_REPORT                   where to write the JSON report
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from harness.contract import title
from harness.contract.classes import (
    CLASSES,
    RULES,
    Run,
    replay,
    separate_ancestry_overlap,
)
from harness.contract.records import read_records
from harness.routers.fidelity import CELL_HEADERS, ProbeReplay, Tally, replay_probes
from harness.targets import TIERS, get_target
from harness.workloads.worker import TreeWorker
from harness.workloads.workloads import WORKER_COMMAND

TREE_VARIABLES = ("HARNESS_PRISTINE_TREE", "HARNESS_PATCHED_TREE")
# The long workload of each config: seed, operations, and probe requests
# looked up at each quiet point for the router-fidelity assertions
# (test_router_fidelity.py; the probes change no event, which it checks).
LONG_WORKLOAD = (1, 600, 4)


def tier_fixes_of(tier: str) -> frozenset[str]:
    """The classes the tier is meant to fix (targets.toml's `fixes`); every
    other class must keep at most its pristine count."""
    return get_target(os.environ.get("HARNESS_TARGET", "main")).fixes[tier]


def tier_stream_of(tier: str) -> str:
    """What the tier's stream is (targets.toml's `streams`): "ancestry" or
    "holdings" (docs/contract.md, C6 and C7)."""
    return get_target(os.environ.get("HARNESS_TARGET", "main")).stream(tier)


def pytest_collection_modifyitems(config, items):
    missing = [name for name in TREE_VARIABLES if not os.environ.get(name)]
    tier = os.environ.get("HARNESS_TIER", "default")
    if missing or tier not in TIERS:
        raise pytest.UsageError(
            "the conformance suite compares two vLLM trees; run it through "
            "`python -m harness test`, or set "
            + " and ".join(f"{name}=<vLLM source tree>" for name in TREE_VARIABLES)
            + f" (HARNESS_TIER one of {', '.join(TIERS)}; got {tier!r}"
            + (f", missing {', '.join(missing)})" if missing else ")")
        )


class Conformance:
    """Runs workloads on both trees (in parallel) and keeps what they found."""

    long_workload = LONG_WORKLOAD

    def __init__(self, pristine: Path, patched: Path, tier: str, scratch: Path):
        self.tier = tier
        self.trees = {"pristine": pristine, "patched": patched}
        self.workers = {
            name: TreeWorker(tree, WORKER_COMMAND, scratch / f"{name}-worker.log")
            for name, tree in self.trees.items()
        }
        self.scratch = scratch
        # (config, seed, ops, probes per quiet point) -> tree -> run.
        self.runs: dict[tuple[str, int, int, int], dict[str, Run]] = {}
        self.counted: set[tuple[str, int, int, int]] = set()
        self.probe_replays: dict[tuple, dict[str, ProbeReplay]] = {}

    def pair(
        self, config: str, seed: int, ops: int, probes: int = 0, counted: bool = True
    ) -> dict[str, Run]:
        """Pristine and patched runs of one seeded workload (cached); with
        ``probes``, that many probe requests at each quiet point
        (`probe_pair`). A run asked for only with ``counted=False`` stays out
        of the totals."""
        key = (config, seed, ops, probes)
        if counted:
            self.counted.add(key)
        if key not in self.runs:
            outs = {
                name: self.scratch / f"{name}-{config}-{seed}-{ops}-{probes}.bin"
                for name in self.workers
            }
            for name, worker in self.workers.items():
                request = {"config": config, "seed": seed, "ops": ops, "probes": probes}
                worker.submit({**request, "out": str(outs[name])})
            for worker in self.workers.values():
                worker.wait()
            records = {name: read_records(out) for name, out in outs.items()}
            runs = {name: replay(records[name]) for name in records}
            separate_ancestry_overlap(runs["pristine"], runs["patched"])
            self.runs[key] = runs
            if probes:
                self.probe_replays[key] = {
                    name: replay_probes(records[name]) for name in records
                }
        return self.runs[key]

    def reset_timing(self) -> dict[str, bool]:
        """Per tree: whether its scheduler publishes a prefix-cache reset's
        events at once (harness.workloads.reset_probe)."""
        outs = {
            name: self.scratch / f"{name}-reset-probe.json" for name in self.workers
        }
        for name, worker in self.workers.items():
            worker.submit({"reset_probe": True, "out": str(outs[name])})
        for worker in self.workers.values():
            worker.wait()
        return {
            name: json.loads(out.read_text())["published_at_reset"]
            for name, out in outs.items()
        }

    def long_pair(self, config: str) -> dict[str, Run]:
        return self.pair(config, *LONG_WORKLOAD)

    def long_probes(self, config: str) -> dict[str, ProbeReplay]:
        return self.probe_pair(config, *LONG_WORKLOAD)

    def probe_pair(
        self, config: str, seed: int, ops: int, probes: int
    ) -> dict[str, ProbeReplay]:
        """The router-fidelity replays of a workload run with probes."""
        self.pair(config, seed, ops, probes)
        return self.probe_replays[config, seed, ops, probes]

    def totals(self) -> dict[str, dict[str, dict[str, int]]]:
        classes = {name: Counter() for name in self.trees}
        rules = {name: Counter() for name in self.trees}
        for pair in self.counted_runs().values():
            for name, run in pair.items():
                classes[name].update(run.classes)
                rules[name].update(run.rules)
        return {
            "classes": {
                cls: {name: classes[name][cls] for name in self.trees}
                for cls in CLASSES
            },
            "ancestry_overlap": sum(
                pair["patched"].ancestry_overlap
                for pair in self.counted_runs().values()
            ),
            "rules": {
                rule: {name: rules[name][rule] for name in self.trees} for rule in RULES
            },
        }

    def by_config(self) -> dict[str, dict[str, Counter]]:
        counts: dict[str, dict[str, Counter]] = defaultdict(
            lambda: {name: Counter() for name in self.trees}
        )
        for (config, *_), pair in self.counted_runs().items():
            for name, run in pair.items():
                counts[config][name].update(run.classes)
        return counts

    def counted_runs(self) -> dict[tuple, dict[str, Run]]:
        """The runs the totals count: every workload the suite declares,
        not the reruns that only compare a stream with and without probes."""
        return {key: self.runs[key] for key in sorted(self.counted)}

    def fidelity(self) -> dict[str, dict[str, dict[str, Tally]]]:
        """config -> tree -> "combined" or "group G (kind)" -> tally, over
        the workloads run with probes."""
        found: dict[str, dict[str, dict[str, Tally]]] = {}
        for (config, *_), pair in sorted(self.probe_replays.items()):
            for name, probe_replay in pair.items():
                rows = found.setdefault(config, {}).setdefault(name, {})
                for row, tally in fidelity_rows(probe_replay).items():
                    rows.setdefault(row, Tally()).merge(tally)
        return found

    def close(self) -> None:
        for worker in self.workers.values():
            worker.close()


def fidelity_rows(probe_replay: ProbeReplay) -> dict[str, Tally]:
    rows = {"combined": probe_replay.tally()}
    if len(probe_replay.layout.groups) > 1:
        for group, layout in enumerate(probe_replay.layout.groups):
            rows[f"group {group} ({layout.kind})"] = probe_replay.tally(group)
    return rows


_session: Conformance | None = None


@pytest.fixture(scope="session")
def conformance():
    global _session
    with tempfile.TemporaryDirectory(prefix="conformance-") as scratch:
        _session = Conformance(
            Path(os.environ["HARNESS_PRISTINE_TREE"]),
            Path(os.environ["HARNESS_PATCHED_TREE"]),
            os.environ.get("HARNESS_TIER", "default"),
            Path(scratch),
        )
        try:
            yield _session
        finally:
            _session.close()


@pytest.fixture(scope="session")
def tier_fixes(conformance) -> frozenset[str]:
    return tier_fixes_of(conformance.tier)


@pytest.fixture(scope="session")
def holdings(conformance) -> bool:
    """The tier's stream is exactly what the pool holds."""
    return tier_stream_of(conformance.tier) == "holdings"


def write_fidelity(write, fidelity) -> None:
    """The router-fidelity table (docs/consumers.md, "Router fidelity")."""
    if not fidelity:
        return
    write(
        "router fidelity (a router indexing the stream against the engine's "
        "own lookup; over/under: count (mean tokens)):"
    )
    width = max(len(config) for config in fidelity) + 2
    write(
        f"  {'config':<{width}}{'tree':<10}{'':<27}"
        + "".join(f"{h:>14}" for h in CELL_HEADERS)
    )
    for config, trees in fidelity.items():
        for name, rows in trees.items():
            for row, tally in rows.items():
                write(
                    f"  {config:<{width}}{name:<10}{row:<27}"
                    + "".join(f"{cell:>14}" for cell in tally.cells())
                )


def pytest_terminal_summary(terminalreporter):
    if _session is None or not _session.runs:
        return
    totals = _session.totals()
    fixes = tier_fixes_of(_session.tier)
    write = terminalreporter.write_line
    terminalreporter.section(
        f"KV-event stream classes, pristine vs patched "
        f"({len(_session.counted)} workloads, tier {_session.tier})"
    )
    write(f"{'class':<30}{'pristine':>10}{'patched':>10}  expected")
    for cls, counts in totals["classes"].items():
        expected = "fixed (0)" if cls in fixes else "no more than pristine"
        write(
            f"{title(cls):<30}{counts['pristine']:>10}{counts['patched']:>10}"
            f"  {expected}"
        )
    write(
        f"ancestry overlap (stores where ancestry and the pool's own entries "
        f"meet; counted apart from K5): {totals['ancestry_overlap']}"
    )
    write(f"{'rule':<30}{'pristine':>10}{'patched':>10}")
    for rule, counts in totals["rules"].items():
        write(f"{title(rule):<30}{counts['pristine']:>10}{counts['patched']:>10}")
    write("per workload config (pristine -> patched):")
    by_config = sorted(_session.by_config().items())
    width = max((len(config) for config, _ in by_config), default=0) + 2
    for config, counts in by_config:
        cells = "  ".join(
            f"{cls} {counts['pristine'][cls]}->{counts['patched'][cls]}"
            for cls in CLASSES
        )
        write(f"  {config:<{width}}{cells}")
    write_fidelity(write, _session.fidelity())
    # An expectation that matched nothing proves nothing: say so.
    for cls in sorted(fixes):
        if not totals["classes"][cls]["pristine"]:
            write(
                f"warning: the {_session.tier} tier claims to fix {cls}, but no "
                f"workload showed {cls} on the pristine tree"
            )
    report = os.environ.get("HARNESS_CONFORMANCE_REPORT")
    if report:
        Path(report).write_text(
            json.dumps(
                {
                    "target": os.environ.get("HARNESS_TARGET"),
                    "tier": _session.tier,
                    "workloads": len(_session.counted),
                    **totals,
                    "fidelity": {
                        config: {
                            name: {row: vars(tally) for row, tally in rows.items()}
                            for name, rows in trees.items()
                        }
                        for config, trees in _session.fidelity().items()
                    },
                },
                indent=2,
            )
            + "\n"
        )
