"""Workloads' streams replayed into a consumer, pristine against patched.

The report runs the seeded workloads of harness.workloads in a pristine and
in patched trees, applies every event to a fresh tree and counts rejected
stores and removals per cause: the label of the pool operation that emitted
the rejected event (``partial:first@full_attention``, ``full@mamba``,
``evict:allocate``, ...). A store rejected because an earlier store was
dropped is counted under its own label, so a drop shows again where its
chain is extended.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.contract.checker import StreamChecker
from harness.contract.classes import matched_events
from harness.contract.records import OpRecord, Record, RunEnd, read_records
from harness.contract.wire import BlockRemoved, BlockStored, KVCacheEvent, decode_event
from harness.log import progress
from harness.routers.dynamo import DynamoAdapter, blocks_in, dynamo_core
from harness.series.apply import cached_patched_tree
from harness.targets import get_target
from harness.trees.sources import pristine_tree
from harness.workloads.drivers import CONFIGS
from harness.workloads.scenarios import SEED_EXAMPLE
from harness.workloads.worker import TreeWorker
from harness.workloads.workloads import WORKER_COMMAND

STORE, REMOVAL = "store", "removal"
# Why an event was rejected: the stream breaks the contract at it, or the
# stream is sound there and the tree had lost what the event needs.
STREAM, TREE = "stream", "tree"
WHY = (STREAM, TREE)


@dataclass
class ConsumerCount:
    """Events applied per (kind, cause) and rejected per (kind, cause, why).

    ``why`` is STREAM when the stream breaks the contract at the event: its
    multiset view (docs/contract.md) lacks the store's parent or the
    removed hash (C1, C2), or the store's tokens do not span its hashes (C3,
    so the adapter cannot send it). It is TREE when the stream is sound there
    but the tree had lost what the event needs (it counts one copy, drops a
    subtree with its root, and never took a store it rejected).

    A patched run's rejections are counted apart for the events the series
    added (``rejected_added``), so that ``rejected`` compares the same
    events in both trees: those pristine emits, which the patched tree
    repeats byte for byte (C7).
    """

    applied: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)
    rejected_added: Counter = field(default_factory=Counter)
    # Blocks still in the tree once a run has evicted everything.
    left_after_drain: int = 0

    def add(self, other: ConsumerCount) -> None:
        self.applied.update(other.applied)
        self.rejected.update(other.rejected)
        self.rejected_added.update(other.rejected_added)
        self.left_after_drain += other.left_after_drain

    def rejected_of(self, kind: str, cause: str) -> int:
        """Rejections of one kind and exactly one cause, for either reason."""
        return sum(self.rejected[kind, cause, why] for why in WHY)

    def rejected_by(
        self,
        kind: str,
        cause_prefix: str | tuple[str, ...] = "",
        why: str | None = None,
    ) -> int:
        """Rejections of one kind whose cause starts with ``cause_prefix``
        (any of them, for a tuple), for reason ``why`` (None: either)."""
        return sum(
            count
            for (rejected_kind, cause, rejected_why), count in self.rejected.items()
            if rejected_kind == kind
            and cause.startswith(cause_prefix)
            and why in (None, rejected_why)
        )


def event_kind(event: KVCacheEvent) -> str:
    if isinstance(event, BlockStored):
        return STORE
    if isinstance(event, BlockRemoved):
        return REMOVAL
    return "clear"


def added_events(
    pristine: list[Record], patched: list[Record]
) -> frozenset[tuple[int, int]]:
    """(operation, event) of every patched event that repeats no pristine
    event of its operation: those the series added."""
    before = [record for record in pristine if isinstance(record, OpRecord)]
    after = [record for record in patched if isinstance(record, OpRecord)]
    added = set()
    for old, new in zip(before, after, strict=True):
        kept = matched_events(old.events, new.events)
        added |= {(new.index, i) for i in range(len(new.events)) if i not in kept}
    return frozenset(added)


def replay_into_dynamo(
    records: Iterable[Record], added: frozenset[tuple[int, int]] = frozenset()
) -> ConsumerCount:
    """Apply a workload's events, in order, to a fresh RadixTree, and to the
    stream checker, which tells why the tree rejected one: the stream breaks
    a rule there (STREAM) or not (TREE). Rejections of the ``added`` events
    ((operation, event)) are counted apart. A run that ends with everything
    evicted counts the blocks left in the tree."""
    tree = dynamo_core().RadixTree()
    adapter = DynamoAdapter(tree)
    checker = StreamChecker()
    count = ConsumerCount()
    for record in records:
        if isinstance(record, RunEnd) and record.drained:
            count.left_after_drain += blocks_in(tree)
        if not isinstance(record, OpRecord):
            continue
        for index, event_record in enumerate(record.events):
            event = decode_event(event_record.data)
            kind = event_kind(event)
            why = STREAM if checker.apply([event]) else TREE
            count.applied[kind, event_record.label] += 1
            rejected = (
                count.rejected_added
                if (record.index, index) in added
                else count.rejected
            )
            rejected[kind, event_record.label, why] += len(adapter.apply(event))
    # Keep the nonzero counts only.
    count.rejected, count.rejected_added = +count.rejected, +count.rejected_added
    return count


def workload_plan(seeds: int, ops: int) -> list[dict[str, Any]]:
    plan = [{"config": SEED_EXAMPLE, "seed": 0, "ops": 0}]
    plan += [
        {"config": config, "seed": seed, "ops": ops}
        for config in CONFIGS
        for seed in range(seeds)
    ]
    return plan


def run_plan(tree: Path, plan: list[dict[str, Any]], scratch: Path) -> list[Path]:
    """Run every planned workload in ``tree``; their record files, in order."""
    outs = []
    with TreeWorker(tree, WORKER_COMMAND, scratch / "worker.log") as worker:
        for index, request in enumerate(plan):
            outs.append(scratch / f"{index}.rec")
            worker.ask({**request, "out": str(outs[-1])})
    return outs


@dataclass(frozen=True)
class Comparison:
    tier: str
    pristine: ConsumerCount
    patched: ConsumerCount

    def causes(self) -> list[tuple[str, str]]:
        """(kind, cause) of every rejection in either tree."""
        found = {key[:2] for key in self.pristine.rejected}
        found |= {key[:2] for key in self.patched.rejected}
        return sorted(found)


def table_row(kind: str, cause: str, cells: list[int]) -> str:
    return f"| {kind} | {cause} | " + " | ".join(map(str, cells)) + " |"


def render(comparisons: list[Comparison]) -> str:
    lines = []
    for comparison in comparisons:
        lines += [
            f"tier {comparison.tier}: events Dynamo's RadixTree rejected "
            "(stream: the stream breaks C1, C2 or C3 there; tree: the stream "
            "holds what the event needs, the tree had lost it)",
            "",
            "| rejected | cause | pristine stream | pristine tree "
            "| patched stream | patched tree |",
            "| --- | --- | ---: | ---: | ---: | ---: |",
        ]
        counts = (comparison.pristine, comparison.patched)
        for kind, cause in comparison.causes():
            cells = [
                count.rejected[kind, cause, why] for count in counts for why in WHY
            ]
            lines.append(table_row(kind, f"`{cause}`", cells))
        for kind in (STORE, REMOVAL):
            cells = [
                count.rejected_by(kind, why=why) for count in counts for why in WHY
            ]
            lines.append(table_row(kind, "**all**", cells))
        lines.append("")
        for name, count in (
            ("pristine", comparison.pristine),
            ("patched", comparison.patched),
        ):
            lines.append(
                f"{name}: {sum(count.applied.values())} events applied, "
                f"{count.rejected_by(STORE)} stores and "
                f"{count.rejected_by(REMOVAL)} removals rejected, "
                f"{count.left_after_drain} blocks left in the tree after "
                "evicting everything"
            )
        added = Counter()
        for (kind, _, why), count in comparison.patched.rejected_added.items():
            added[kind] += count
            added[why] += count
        lines.append(
            f"events the series added that the tree rejected (not in the table): "
            f"{added[STORE]} stores, {added[REMOVAL]} removals, {added[STREAM]} "
            "of them for a reason the stream causes"
        )
        lines.append("")
    return "\n".join(lines)


def compare(
    target_name: str, tiers: Iterable[str], seeds: int, ops: int
) -> list[Comparison]:
    target = get_target(target_name)
    plan = workload_plan(seeds, ops)
    with tempfile.TemporaryDirectory() as scratch:
        progress(f"consumers: {len(plan)} workloads in the pristine tree")
        (Path(scratch) / "pristine").mkdir()
        baseline = run_plan(pristine_tree(target), plan, Path(scratch) / "pristine")
        pristine = ConsumerCount()
        for path in baseline:
            pristine.add(replay_into_dynamo(read_records(path)))
        comparisons = []
        for tier in tiers:
            progress(f"consumers: {len(plan)} workloads in the {tier} tier's tree")
            (Path(scratch) / tier).mkdir()
            tree = cached_patched_tree(target, tier)
            patched = ConsumerCount()
            for before, path in zip(
                baseline, run_plan(tree, plan, Path(scratch) / tier), strict=True
            ):
                records = read_records(path)
                added = added_events(read_records(before), records)
                patched.add(replay_into_dynamo(records, added))
            comparisons.append(Comparison(tier, pristine, patched))
    return comparisons
