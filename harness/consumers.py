"""Feed KV-event streams to a real consumer: NVIDIA Dynamo's radix tree
(the `consumers` verb).

The adapter turns harness.stream's wire structs into the JSON events that
``dynamo._core.RadixTree.apply_event`` reads (ai-dynamo-runtime 1.6.1):

- ``BlockStored`` -> ``{"stored": {"parent_hash": P, "blocks": [{"block_hash":
  H, "tokens_hash": T}, ...]}}``, one block per reported hash;
- ``BlockRemoved`` -> ``{"removed": {"block_hashes": [H, ...]}}``;
- ``AllBlocksCleared`` -> ``"cleared"``, sent to every worker the adapter
  has used, since vLLM clears every view.

Hashes become 64-bit integers the way vLLM's ``maybe_convert_block_hash``
makes them (bytes: big-endian, low 64 bits kept; integers as they are).
``tokens_hash`` is Dynamo's own hash of the block's token ids
(``compute_block_hash_for_seq`` over exactly that block), which is what the
tree keys a node's children by. ``event_id`` increases by one per applied
event.

The engine is one worker. Dynamo's tree has no notion of vLLM's views
``(medium, group_idx)``, and groups of one engine report the same hashes, so
each view gets its own worker id: without that, a removal in one group would
drop the other group's copy. A store whose parent the tree does not hold
raises "Failed to find parent block" and is dropped whole; a removal of a
hash it does not hold raises "Failed to find block". The tree does not count
copies (a second store of a live hash is accepted, one removal drops it) and
removing a node drops its subtree. A store whose tokens do not span its
hashes (rule C3) gives no block its tokens, so the adapter does not send it
and counts it as rejected.

The report runs the seeded workloads of harness.workloads in a pristine and
in patched trees, applies every event to a fresh tree and counts rejected
stores and removals per cause: the label of the pool operation that emitted
the rejected event (``partial:first@full_attention``, ``full@mamba``,
``evict:allocate``, ...). A store rejected because an earlier store was
dropped is counted under its own label, so a drop shows again where its
chain is extended.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.cli import UserError
from harness.stream import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    ExternalBlockHash,
    KVCacheEvent,
    StreamChecker,
    decode_event,
)
from harness.workloads import CONFIGS, OpRecord, Record, RunEnd, read_records

REPO_ROOT = Path(__file__).resolve().parent.parent
MASK_64 = (1 << 64) - 1
STORE, REMOVAL = "store", "removal"
# Why an event was rejected: the stream breaks the contract at it, or the
# stream is sound there and the tree had lost what the event needs.
STREAM, TREE = "stream", "tree"
WHY = (STREAM, TREE)
# The configs the report runs: every seeded driver, plus the seed report's
# 1800-token example (one run, the seed is ignored).
SEED_EXAMPLE = "seed-1800"
DEFAULT_SEEDS = 3
DEFAULT_OPS = 300


class WorkloadError(UserError):
    """A workload that did not run in a tree."""


def dynamo_hash(block_hash: ExternalBlockHash) -> int:
    """A vLLM event hash as the 64-bit integer Dynamo keys blocks by."""
    if isinstance(block_hash, bytes):
        return int.from_bytes(block_hash, "big") & MASK_64
    return block_hash


def tokens_hash(token_ids: list[int]) -> int:
    """Dynamo's hash of one block's token ids."""
    from dynamo._core import compute_block_hash_for_seq

    (value,) = compute_block_hash_for_seq(token_ids, len(token_ids))
    return value


class Unplaceable(ValueError):
    """A store whose tokens do not span its hashes (rule C3)."""


def spans_its_blocks(event: BlockStored) -> bool:
    return len(event.block_hashes) * event.block_size == len(event.token_ids)


def dynamo_data(event: BlockStored | BlockRemoved) -> dict[str, Any]:
    """The ``data`` member of Dynamo's event for a store or a removal."""
    if isinstance(event, BlockRemoved):
        return {
            "removed": {"block_hashes": [dynamo_hash(h) for h in event.block_hashes]}
        }
    size = event.block_size
    if not spans_its_blocks(event):
        raise Unplaceable(
            f"store of {len(event.block_hashes)} hashes x block_size {size} carries "
            f"{len(event.token_ids)} tokens (rule C3): no tokens to hash per block"
        )
    parent = event.parent_block_hash
    return {
        "stored": {
            "parent_hash": None if parent is None else dynamo_hash(parent),
            "blocks": [
                {
                    "block_hash": dynamo_hash(block_hash),
                    "tokens_hash": tokens_hash(
                        event.token_ids[index * size : (index + 1) * size]
                    ),
                }
                for index, block_hash in enumerate(event.block_hashes)
            ],
        }
    }


@dataclass
class DynamoAdapter:
    """Applies vLLM events to a Dynamo RadixTree, one worker id per view."""

    tree: Any
    workers: dict[tuple[str | None, int | None], int] = field(default_factory=dict)
    next_event_id: int = 0

    def apply(self, event: KVCacheEvent) -> list[str]:
        """Apply one event; return the tree's rejection messages (none if it
        took the event)."""
        if isinstance(event, AllBlocksCleared):
            return [
                message
                for worker in self.workers.values()
                if (message := self._send(worker, "cleared")) is not None
            ]
        view = (event.medium, event.group_idx)
        worker = self.workers.setdefault(view, len(self.workers))
        try:
            data = dynamo_data(event)
        except Unplaceable as exc:  # a relay cannot build the event: not sent
            return [f"not sent: {exc}"]
        message = self._send(worker, data)
        return [] if message is None else [message]

    def _send(self, worker: int, data: dict[str, Any] | str) -> str | None:
        payload = {"event_id": self.next_event_id, "data": data, "dp_rank": 0}
        self.next_event_id += 1
        try:
            self.tree.apply_event(worker, json.dumps(payload).encode())
        except RuntimeError as exc:  # ValueError (undecodable) is our bug
            return str(exc)
        return None


@dataclass
class ConsumerCount:
    """Events applied per (kind, cause) and rejected per (kind, cause, why).

    ``why`` is STREAM when the stream breaks the contract at the event: its
    multiset view (docs/stream-contract.md) lacks the store's parent or the
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


def stream_fault(checker: StreamChecker, event: KVCacheEvent) -> bool:
    """Whether the stream, replayed up to ``event`` into the checker's
    multiset view, breaks C1, C2 or C3 at it."""
    if isinstance(event, AllBlocksCleared):
        return False
    view = (event.medium, event.group_idx)
    if isinstance(event, BlockStored):
        parent = event.parent_block_hash
        unreported = parent is not None and not checker.live_count(view, parent)
        return unreported or not spans_its_blocks(event)
    return any(not checker.live_count(view, h) for h in event.block_hashes)


def replay_into_dynamo(records: Iterable[Record]) -> ConsumerCount:
    """Apply a workload's events, in order, to a fresh RadixTree, and to the
    stream checker's multiset view to tell why the tree rejected one. A run
    that ends with everything evicted counts the blocks left in the tree."""
    # The tree logs a warning per rejection; they are counted here instead.
    os.environ.setdefault("DYN_LOG", "error")
    from dynamo._core import RadixTree

    tree = RadixTree()
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
            why = STREAM if stream_fault(checker, event) else TREE
            count.applied[kind, event_record.label] += 1
            rejections = len(adapter.apply(event))
            count.rejected[kind, event_record.label, why] += rejections
            checker.apply([event])
    count.rejected = +count.rejected  # keep the nonzero counts only
    return count


def blocks_in(tree: Any) -> int:
    """Blocks the tree holds, over all workers."""
    return sum(
        len(json.loads(dumped)["event"]["data"]["stored"]["blocks"])
        for dumped in tree.dump_tree_as_events()
    )


# --------------------------------------------------------------------------
# Running the workloads in a tree
# --------------------------------------------------------------------------


@contextmanager
def workload_server(tree: Path, log: Path) -> Iterator[subprocess.Popen]:
    """``python -m harness.workloads --serve`` with ``tree`` first on the path,
    its stderr (vLLM's log included) written to ``log``."""
    env = {
        **os.environ,
        "PYTHONPATH": f"{tree}{os.pathsep}{REPO_ROOT}",
        "VLLM_TARGET_DEVICE": "cpu",
    }
    with log.open("w") as log_file:
        server = subprocess.Popen(
            [sys.executable, "-m", "harness.workloads", "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log_file,
            env=env,
            text=True,
        )
        try:
            yield server
        finally:
            server.stdin.close()
            server.wait()


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
        log = Path(scratch) / "server.log"
        with workload_server(tree, log) as server:
            for index, request in enumerate(plan):
                out = Path(scratch) / f"{index}.rec"
                server.stdin.write(json.dumps({**request, "out": str(out)}) + "\n")
                server.stdin.flush()
                reply = json.loads(server.stdout.readline() or "{}")
                if not reply.get("ok"):
                    tail = "\n".join(log.read_text().splitlines()[-20:])
                    raise WorkloadError(
                        f"workload {request} failed in {tree}: "
                        f"{reply.get('error', 'the server exited')}\n{tail}"
                    )
                total.add(replay_into_dynamo(read_records(out)))
    return total


# --------------------------------------------------------------------------
# The consumers verb
# --------------------------------------------------------------------------


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
    from harness.series import cached_patched_tree
    from harness.sources import pristine_tree, progress
    from harness.targets import get_target

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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default="main")
    parser.add_argument(
        "--tier",
        dest="tiers",
        action="append",
        choices=("default", "strict"),
        help="repeat for several (default: default and strict)",
    )
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS)
    parser.add_argument("--ops", type=int, default=DEFAULT_OPS)


def run(args: argparse.Namespace) -> int:
    comparisons = compare(
        args.target, args.tiers or ["default", "strict"], args.seeds, args.ops
    )
    print(render(comparisons))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "consumers",
        help="count what Dynamo's radix tree rejects, pristine against patched",
        description="Run the seeded workloads in the pristine and the patched "
        "trees of a target, apply their KV events to NVIDIA Dynamo's RadixTree "
        "and print rejected stores and removals per cause.",
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.consumers")
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
