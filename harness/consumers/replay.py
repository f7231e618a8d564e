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

import os
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.consumers.dynamo import DynamoAdapter, blocks_in
from harness.contract.checker import StreamChecker
from harness.contract.records import OpRecord, Record, RunEnd, read_records
from harness.contract.wire import BlockRemoved, BlockStored, KVCacheEvent, decode_event
from harness.errors import require
from harness.log import progress
from harness.runs.drivers import CONFIGS
from harness.runs.scenarios import SEED_EXAMPLE
from harness.runs.worker import TreeWorker
from harness.runs.workloads import WORKER_COMMAND
from harness.series.apply import cached_patched_tree
from harness.targets import get_target
from harness.trees.sources import pristine_tree

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
    """

    applied: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)
    # Blocks still in the tree once a run has evicted everything.
    left_after_drain: int = 0

    def add(self, other: ConsumerCount) -> None:
        self.applied.update(other.applied)
        self.rejected.update(other.rejected)
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


def replay_into_dynamo(records: Iterable[Record]) -> ConsumerCount:
    """Apply a workload's events, in order, to a fresh RadixTree, and to the
    stream checker, which tells why the tree rejected one: the stream breaks
    a rule there (STREAM) or not (TREE). A run that ends with everything
    evicted counts the blocks left in the tree."""
    # The tree logs a warning per rejection; they are counted here instead.
    os.environ.setdefault("DYN_LOG", "error")
    tree = require("dynamo._core", "consumers").RadixTree()
    adapter = DynamoAdapter(tree)
    checker = StreamChecker()
    count = ConsumerCount()
    for record in records:
        if isinstance(record, RunEnd) and record.drained:
            count.left_after_drain += blocks_in(tree)
        if not isinstance(record, OpRecord):
            continue
        for event_record in record.events:
            event = decode_event(event_record.data)
            kind = event_kind(event)
            why = STREAM if checker.apply([event]) else TREE
            count.applied[kind, event_record.label] += 1
            rejections = len(adapter.apply(event))
            count.rejected[kind, event_record.label, why] += rejections
    count.rejected = +count.rejected  # keep the nonzero counts only
    return count


def workload_plan(seeds: int, ops: int) -> list[dict[str, Any]]:
    plan = [{"config": SEED_EXAMPLE, "seed": 0, "ops": 0}]
    plan += [
        {"config": config, "seed": seed, "ops": ops}
        for config in CONFIGS
        for seed in range(seeds)
    ]
    return plan


def count_tree(tree: Path, plan: list[dict[str, Any]]) -> ConsumerCount:
    """Run every planned workload in ``tree`` and feed each to Dynamo."""
    total = ConsumerCount()
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "worker.log"
        with TreeWorker(tree, WORKER_COMMAND, log) as worker:
            for index, request in enumerate(plan):
                out = Path(scratch) / f"{index}.rec"
                worker.ask({**request, "out": str(out)})
                total.add(replay_into_dynamo(read_records(out)))
    return total


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
        lines.append("")
    return "\n".join(lines)


def compare(
    target_name: str, tiers: Iterable[str], seeds: int, ops: int
) -> list[Comparison]:
    target = get_target(target_name)
    plan = workload_plan(seeds, ops)
    progress(f"consumers: {len(plan)} workloads in the pristine tree")
    pristine = count_tree(pristine_tree(target), plan)
    comparisons = []
    for tier in tiers:
        progress(f"consumers: {len(plan)} workloads in the {tier} tier's tree")
        patched = count_tree(cached_patched_tree(target, tier), plan)
        comparisons.append(Comparison(tier, pristine, patched))
    return comparisons
