"""Router fidelity per workload config and tree: the `fidelity` verb's table.

Runs the seeded workloads with probes (harness.workloads.probes) in the pristine
tree and in each patched tree, replays each run into the content-tree router
(harness.routers.fidelity) and, when asked, into NVIDIA Dynamo's RadixTree
(harness.routers.dynamo), and counts exact, over- and under-predicted hits
per config, tree and group (docs/consumers.md, "Router fidelity").

Dynamo's prediction for a group is its tree's match for the probe in that
group's view (`DynamoAdapter.matched_tokens`), capped at ``num_tokens - 1``
and rounded down to the engine's alignment as the reference is. Dynamo has no
rule for hybrid models; its combined prediction is its shortest per-group
match (a hit needs every group).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.contract.records import OpRecord, ProbeRecord, Record, read_records
from harness.contract.wire import decode_event
from harness.log import progress
from harness.routers import DEFAULT_PROBES
from harness.routers.dynamo import DynamoAdapter, dynamo_core
from harness.routers.fidelity import CELL_HEADERS, ProbeReplay, Tally, replay_probes
from harness.routers.router import EngineLayout
from harness.workloads.worker import TreeWorker
from harness.workloads.workloads import WORKER_COMMAND

COMBINED = "combined"


def row_names(layout: EngineLayout) -> list[str]:
    """The table's rows for one config: the combined hit, then each group
    (a single group is its own combined hit)."""
    if len(layout.groups) == 1:
        return [COMBINED]
    return [COMBINED] + [
        f"group {index} ({group.kind})" for index, group in enumerate(layout.groups)
    ]


def reference_tallies(replay: ProbeReplay) -> dict[str, Tally]:
    rows = row_names(replay.layout)
    tallies = {COMBINED: replay.tally()}
    for index, name in enumerate(rows[1:]):
        tallies[name] = replay.tally(index)
    return tallies


def dynamo_predictions(records: list[Record], layout: EngineLayout) -> list[list[int]]:
    """Replay the run into a fresh RadixTree; at each quiet point, each
    probe's prediction per group (`dynamo_group_prediction`), in the order
    of the run's probes."""
    core = dynamo_core()
    adapter = DynamoAdapter(core.RadixTree())
    found = []
    for record in records:
        if isinstance(record, OpRecord):
            for event in record.events:
                adapter.apply(decode_event(event.data))
        elif isinstance(record, ProbeRecord):
            found += [
                [
                    dynamo_group_prediction(adapter, layout, group, probe.token_ids)
                    for group in range(len(layout.groups))
                ]
                for probe in record.probes
            ]
    return found


def dynamo_tallies(records: list[Record], replay: ProbeReplay) -> dict[str, Tally]:
    """Dynamo's predictions against the same engine hits as the reference's;
    its combined prediction is its shortest per-group one."""
    rows = row_names(replay.layout)
    tallies = {name: Tally() for name in rows}
    predictions = dynamo_predictions(records, replay.layout)
    for per_group, outcome in zip(predictions, replay.outcomes, strict=True):
        tallies[COMBINED].add(min(per_group), outcome.truth.combined)
        for group, name in enumerate(rows[1:]):
            tallies[name].add(per_group[group], outcome.truth.per_group[group])
    return tallies


def dynamo_group_prediction(
    adapter: DynamoAdapter, layout: EngineLayout, group: int, token_ids: list[int]
) -> int:
    matched = adapter.matched_tokens(
        (layout.medium, group),
        token_ids,
        layout.groups[group].block_size,
        layout.hash_block_size,
        len(token_ids) - 1,
    )
    return matched - matched % layout.alignment


@dataclass
class ConfigFidelity:
    """One config in one tree, over its seeds."""

    rows: list[str]
    reference: dict[str, Tally] = field(default_factory=dict)
    dynamo: dict[str, Tally] | None = None
    refused_stores: int = 0

    def add(self, replay: ProbeReplay, dynamo: dict[str, Tally] | None) -> None:
        for name, tally in reference_tallies(replay).items():
            self.reference.setdefault(name, Tally()).merge(tally)
        if dynamo is not None:
            self.dynamo = self.dynamo or {}
            for name, tally in dynamo.items():
                self.dynamo.setdefault(name, Tally()).merge(tally)
        self.refused_stores += replay.refused_stores


@dataclass
class FidelityTable:
    """config -> tree -> ConfigFidelity, in the order they were measured."""

    seeds: int
    ops: int
    probes: int
    configs: dict[str, dict[str, ConfigFidelity]] = field(default_factory=dict)

    def add(self, config, tree, replay, dynamo) -> None:
        trees = self.configs.setdefault(config, {})
        found = trees.setdefault(tree, ConfigFidelity(row_names(replay.layout)))
        found.add(replay, dynamo)

    def totals(self, tree: str, dynamo: bool = False) -> Tally:
        """Combined hits over every config, for one tree."""
        total = Tally()
        for trees in self.configs.values():
            found = trees.get(tree)
            tallies = (
                None if found is None else (found.dynamo if dynamo else found.reference)
            )
            if tallies is not None:
                total.merge(tallies[COMBINED])
        return total

    def trees(self) -> list[str]:
        return list(dict.fromkeys(name for t in self.configs.values() for name in t))


def probe_runs(
    trees: dict[str, Path],
    configs: Iterable[str],
    seeds: int,
    ops: int,
    probes: int = DEFAULT_PROBES,
) -> Iterator[tuple[str, str, list[Record], ProbeReplay]]:
    """Run every (config, seed) with probes in every tree, one worker per
    tree; yield (config, tree name, records, replay) for each run."""
    with tempfile.TemporaryDirectory() as scratch:
        workers = {
            name: TreeWorker(tree, WORKER_COMMAND, Path(scratch) / f"{name}.log")
            for name, tree in trees.items()
        }
        try:
            for config in configs:
                progress(f"fidelity: {config}, {seeds} seeds x {ops} operations")
                for seed in range(seeds):
                    outs = run_everywhere(workers, config, seed, ops, probes, scratch)
                    for name, out in outs.items():
                        records = read_records(out)
                        yield config, name, records, replay_probes(records)
        finally:
            for worker in workers.values():
                worker.close()


def measure(
    trees: dict[str, Path],
    configs: Iterable[str],
    seeds: int,
    ops: int,
    probes: int = DEFAULT_PROBES,
    dynamo: bool = False,
) -> FidelityTable:
    """Tally the content-tree router's (and Dynamo's) predictions over every
    (config, seed) in every tree."""
    table = FidelityTable(seeds, ops, probes)
    for config, name, records, replay in probe_runs(trees, configs, seeds, ops, probes):
        found = dynamo_tallies(records, replay) if dynamo else None
        table.add(config, name, replay, found)
    return table


def run_everywhere(
    workers: dict[str, TreeWorker], config, seed, ops, probes, scratch
) -> dict[str, Path]:
    """One workload in every tree at once; the record file of each."""
    outs = {name: Path(scratch) / f"{name}-{config}-{seed}.rec" for name in workers}
    request: dict[str, Any] = {"config": config, "seed": seed, "ops": ops}
    for name, worker in workers.items():
        worker.submit({**request, "probes": probes, "out": str(outs[name])})
    for worker in workers.values():
        worker.wait()
    return outs


def render(table: FidelityTable) -> str:
    """The table as markdown, then each tree's totals."""
    with_dynamo = any(
        found.dynamo is not None
        for trees in table.configs.values()
        for found in trees.values()
    )
    headers = ["config", "tree", "hit", *CELL_HEADERS]
    if with_dynamo:
        headers += [f"Dynamo {name}" for name in CELL_HEADERS[2:]]
    lines = [
        f"Router fidelity: {table.seeds} seeds x {table.ops} operations per "
        f"config, {table.probes} probes per quiet point. over/under: probes "
        "(mean tokens).",
        "",
        "| " + " | ".join(headers) + " |",
        "| --- | --- | --- |" + " ---: |" * (len(headers) - 3),
    ]
    for config, trees in table.configs.items():
        for tree, found in trees.items():
            for row in found.rows:
                cells = [f"`{config}`", tree, row, *found.reference[row].cells()]
                if with_dynamo:
                    cells += (
                        found.dynamo[row].cells()[2:] if found.dynamo else ["-"] * 3
                    )
                lines.append("| " + " | ".join(cells) + " |")
    for tree in table.trees():
        cells = ["**all**", tree, COMBINED, *table.totals(tree).cells()]
        if with_dynamo:
            cells += table.totals(tree, dynamo=True).cells()[2:]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for tree in table.trees():
        refused = sum(
            trees[tree].refused_stores
            for trees in table.configs.values()
            if tree in trees
        )
        lines.append(
            f"{tree}: {refused} stores the content-tree router could not place"
        )
    return "\n".join(lines)
