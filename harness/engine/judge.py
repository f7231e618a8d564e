"""What the stream checker finds in one engine session's capture, and how
well a router indexing it predicts the engine's hits.

Router fidelity on a real engine: requests go one at a time, so the stream
published before a request was sent (the batches stamped earlier than its
send time, on the same machine's clock) is what a router knew when it routed
it, and the request's ``num_cached_tokens`` is the hit the engine served.
The content-tree router (harness.routers.router) indexes those batches and
predicts the hit with vLLM's rules for the engine's layout (`engine_layout`);
the hash-set router, which keeps every announced hash and needs no parent,
predicts it from the same batches.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from harness.contract.checker import PARENT_REMOVED, StreamChecker, Violation
from harness.contract.wire import (
    AllBlocksCleared,
    BlockStored,
    KVEventBatch,
    decode_batch,
)
from harness.engine.engine import BLOCK_SIZE, HASH_BLOCK_SIZE, SHARED_TOKENS
from harness.engine.session import Session
from harness.routers.fidelity import CELL_HEADERS, Tally
from harness.routers.router import EngineLayout, GroupLayout, RouterIndex, predict


@dataclass
class SessionReport:
    """What the stream checker found in one session's capture."""

    session: Session
    batches: int = 0
    events: int = 0
    clears: int = 0
    # Stores of one hash block: partial entries (and, patched, their ancestry).
    hash_block_stores: int = 0
    violations: list[Violation] = field(default_factory=list)
    # C1 on a store of one hash block whose parent no event ever reported
    # (a first registration) / whose parent was reported and removed before
    # (a promotion, class K3).
    unreported_parent: list[Violation] = field(default_factory=list)
    removed_parent: list[Violation] = field(default_factory=list)
    # The same C1 breaches as unreported_parent for stores of entries inside
    # the first cache block (class K2: no tier but the strict one reports a
    # parent there), counted apart, by group.
    first_block_unreported: Counter = field(default_factory=Counter)
    # Hashes of shared-prefix blocks live when the cache was reset and at
    # the end; the eviction traffic should have retired every one.
    shared_live_at_reset: int = 0
    shared_live_at_end: int = 0
    duplicate_stores: int = 0
    # Violations at an event, by the KV cache group of that event (its
    # group_idx and kv_cache_spec_kind): group -> rule -> count; every group
    # the stream names has an entry.
    by_group: dict[str, Counter] = field(default_factory=dict)
    # The same, counting only violations at stores of whole cache blocks
    # (BLOCK_SIZE): in the Mamba group, class K4's (align mode's skipped
    # blocks), apart from the partial entries' stores of one hash block.
    whole_block_by_group: dict[str, Counter] = field(default_factory=dict)
    # Router fidelity: combined hits predicted from the stream against the
    # engine's num_cached_tokens, and (phase, predicted, served) per request:
    # the content tree's, and the hash set's.
    fidelity: Tally = field(default_factory=Tally)
    predictions: list[tuple[str, int, int]] = field(default_factory=list)
    hash_set_fidelity: Tally = field(default_factory=Tally)
    hash_set_predictions: list[tuple[str, int, int]] = field(default_factory=list)
    # Prefix-cache resets, and those whose AllBlocksCleared reached the
    # stream only after the next request was sent (rule C9).
    resets: int = 0
    late_resets: int = 0
    # Indexes into `predictions` of the requests sent right after a reset.
    after_reset: list[int] = field(default_factory=list)

    def as_json(self) -> dict:
        """The counts of the session, for the e2e report (harness.engine.e2e)."""
        session = self.session
        return {
            "wall_seconds": round(session.wall_s, 1),
            "returncode": session.returncode,
            "batches": self.batches,
            "events": self.events,
            "clears": self.clears,
            "hash_block_stores": self.hash_block_stores,
            "duplicate_stores": self.duplicate_stores,
            "violations": self.rules(),
            "by_group": {
                group: dict(sorted(rules.items()))
                for group, rules in sorted(self.by_group.items())
            },
            "whole_block_by_group": {
                group: dict(sorted(rules.items()))
                for group, rules in sorted(self.whole_block_by_group.items())
            },
            "unreported_parent": len(self.unreported_parent),
            "first_block_unreported": dict(sorted(self.first_block_unreported.items())),
            "removed_parent": len(self.removed_parent),
            "shared_live_at_reset": self.shared_live_at_reset,
            "shared_live_at_end": self.shared_live_at_end,
            "outlived_leader": len(session.outlived_leader),
            "survivors": len(session.survivors),
            "fidelity": asdict(self.fidelity),
            "predictions": [list(prediction) for prediction in self.predictions],
            "hash_set_fidelity": asdict(self.hash_set_fidelity),
            "hash_set_predictions": [
                list(prediction) for prediction in self.hash_set_predictions
            ],
            "resets": self.resets,
            "late_resets": self.late_resets,
        }

    def rules(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for violation in self.violations:
            found[violation.rule] = found.get(violation.rule, 0) + 1
        return found

    def render(self) -> str:
        session = self.session
        lines = [
            f"{session.label}: {session.wall_s:.0f} s, engine exit "
            f"{session.returncode}, {self.batches} batches, {self.events} events, "
            f"{self.clears} AllBlocksCleared, {self.hash_block_stores} stores of "
            f"one hash block, {self.duplicate_stores} stores of a live hash",
            f"  violations by rule: {self.rules() or 'none'}",
            "  by group: "
            + "; ".join(
                f"{group}: {dict(rules) or 'none'}"
                for group, rules in sorted(self.by_group.items())
            ),
            "  at whole-block stores: "
            + "; ".join(
                f"{group}: {dict(rules) or 'none'}"
                for group, rules in sorted(self.whole_block_by_group.items())
            ),
            f"  C1 on a hash-block store, parent never reported: "
            f"{len(self.unreported_parent)} past the first cache block, "
            f"{sum(self.first_block_unreported.values())} inside it; parent "
            f"removed before: {len(self.removed_parent)}",
            f"  shared-prefix hashes live at the reset: {self.shared_live_at_reset}, "
            f"at the end: {self.shared_live_at_end}",
            f"  processes left after the engine's exit: "
            f"{len(session.outlived_leader)}; after the group kill: "
            f"{len(session.survivors)}",
            "  router fidelity ("
            + ", ".join(CELL_HEADERS)
            + "): content tree "
            + ", ".join(self.fidelity.cells())
            + "; hash set "
            + ", ".join(self.hash_set_fidelity.cells()),
            "  per request, content tree's predicted/served (* where they "
            "differ): " + predicted_served(self.predictions),
            "  the same, hash set's: " + predicted_served(self.hash_set_predictions),
            f"  prefix-cache resets: {self.resets}, reaching the stream after "
            f"the next request was sent: {self.late_resets}",
        ]
        lines += [f"    {violation}" for violation in self.violations[:5]]
        return "\n".join(lines)


def predicted_served(predictions: list[tuple[str, int, int]]) -> str:
    return " ".join(
        f"{predicted}/{served}" + ("" if predicted == served else "*")
        for _, predicted, served in predictions
    )


def shared_hashes_live(checker: StreamChecker, shared: set) -> int:
    return sum(
        1
        for live in checker.views.values()
        for block_hash in live
        if block_hash in shared
    )


def judge(session: Session) -> SessionReport:
    """Replay the capture; sort C1 breaches on hash-block stores by what the
    checker saw of their parent (never reported, or reported and removed);
    count shared-prefix hashes left live when the cache was reset and at the
    end."""
    report = SessionReport(session)
    checker = StreamChecker(track_ancestry=True)
    # Where each hash the session's requests carry ends, in tokens.
    ends = {
        block_hash: (index + 1) * HASH_BLOCK_SIZE
        for request in session.requests
        for index, block_hash in enumerate(request.block_hashes)
    }
    shared: set = set()  # hashes of blocks made of shared-prefix tokens
    kinds: dict[int | None, str | None] = {}  # group_idx -> kv_cache_spec_kind
    # (group_idx, rule, whether the event stores whole cache blocks)
    at_group: list[tuple[int | None, str, bool]] = []
    for index, payload in enumerate(session.payloads):
        batch = decode_batch(payload, f"{session.label} message {index}")
        report.batches += 1
        report.events += len(batch.events)
        for position, event in enumerate(batch.events):
            if isinstance(event, AllBlocksCleared):
                report.clears += 1
                # The last reset follows eviction traffic: nothing of the
                # shared prefix should be live by then.
                before_clear = StreamChecker(views=copy_views(checker))
                before_clear.apply(batch.events[:position])
                report.shared_live_at_reset = shared_hashes_live(before_clear, shared)
        for event in batch.events:
            if isinstance(event, BlockStored):
                kinds.setdefault(event.group_idx, event.kv_cache_spec_kind)
        for violation in checker.apply(batch.events):
            event = batch.events[violation.event]
            whole = getattr(event, "block_size", None) == BLOCK_SIZE
            at_group.append((event.group_idx, violation.rule, whole))
            if violation.rule == "C1" and event.block_size == HASH_BLOCK_SIZE:
                if violation.cause == PARENT_REMOVED:
                    report.removed_parent.append(violation)
                elif ends.get(event.block_hashes[0], BLOCK_SIZE + 1) <= BLOCK_SIZE:
                    label = group_label(event.group_idx, event.kv_cache_spec_kind)
                    report.first_block_unreported[label] += 1
                else:
                    report.unreported_parent.append(violation)
        for event in batch.events:
            if isinstance(event, BlockStored):
                size = event.block_size
                report.hash_block_stores += size == HASH_BLOCK_SIZE
                for number, block_hash in enumerate(event.block_hashes):
                    if event.token_ids[number * size] in SHARED_TOKENS:
                        shared.add(block_hash)
    report.violations = checker.violations
    report.by_group = {
        group_label(group, kind): Counter() for group, kind in kinds.items()
    }
    report.whole_block_by_group = {label: Counter() for label in report.by_group}
    for group, rule, whole in at_group:
        label = group_label(group, kinds.get(group))
        report.by_group.setdefault(label, Counter())[rule] += 1
        if whole:
            report.whole_block_by_group.setdefault(label, Counter())[rule] += 1
    report.shared_live_at_end = shared_hashes_live(checker, shared)
    report.duplicate_stores = checker.duplicate_stores
    judge_fidelity(report)
    return report


def group_label(group_idx: int | None, kind: str | None) -> str:
    return f"group {group_idx} ({kind or 'unnamed kind'})"


def engine_layout(batches: list[KVEventBatch]) -> EngineLayout:
    """The e2e engine as a router is configured for it: hash blocks of
    HASH_BLOCK_SIZE, every group in BLOCK_SIZE blocks, and hits at the hash
    block (partial hash hits are on: Mamba in align mode with blocks larger
    than the hash block). Each group's kind is the one its stores carry."""
    kinds: dict[int, str] = {}
    medium = None
    for batch in batches:
        for event in batch.events:
            if isinstance(event, BlockStored) and event.kv_cache_spec_kind:
                kinds.setdefault(event.group_idx or 0, event.kv_cache_spec_kind)
                medium = medium or event.medium
    return EngineLayout(
        hash_block_size=HASH_BLOCK_SIZE,
        alignment=HASH_BLOCK_SIZE,
        groups=tuple(
            GroupLayout(kinds[group], BLOCK_SIZE) for group in range(len(kinds))
        ),
        medium=medium,
    )


def judge_fidelity(report: SessionReport) -> None:
    """Each request's hit, predicted from the batches published before it
    was sent by the content tree and by the hash set, against the engine's
    num_cached_tokens."""
    session = report.session
    batches = [
        decode_batch(payload, f"{session.label} message {index}")
        for index, payload in enumerate(session.payloads)
    ]
    if not session.requests or not batches:
        return
    layout = engine_layout(batches)
    index, hash_set = RouterIndex(), RouterIndex(refuse_orphans=False)
    applied = 0
    pending_reset = False
    for request in session.requests:
        while applied < len(batches) and batches[applied].ts < request.sent:
            for event in batches[applied].events:
                pending_reset = pending_reset and not isinstance(
                    event, AllBlocksCleared
                )
            index.apply_all(batches[applied].events)
            hash_set.apply_all(batches[applied].events)
            applied += 1
        report.late_resets += pending_reset
        if request.phase == "reset":
            report.resets += 1
            pending_reset = True
            report.after_reset.append(len(report.predictions))
            continue
        pending_reset = False
        served = request.num_cached_tokens
        for router, tally, predictions in (
            (index, report.fidelity, report.predictions),
            (hash_set, report.hash_set_fidelity, report.hash_set_predictions),
        ):
            predicted = predict(
                layout,
                router.holding(layout.medium),
                request.block_hashes,
                len(request.token_ids),
            ).combined
            tally.add(predicted, served)
            predictions.append((request.phase, predicted, served))


def copy_views(checker: StreamChecker) -> dict:
    return {key: dict(live) for key, live in checker.views.items()}
