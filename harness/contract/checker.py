"""The stream checker: replays KV events and reports contract violations.

Replays decoded events (harness.contract.wire) into one multiset view per
``(medium, group_idx)`` and reports every breach of the stream contract
(docs/contract.md) that a stream alone can show:

- C1 a stored block's parent is not live when the store is applied;
- C2 a removed hash is not live when the removal is applied;
- C3 ``len(block_hashes) * block_size != len(token_ids)``;
- C4 a reported hash is not the chain hash of the tokens leading to it
  (needs a `HashModel`, harness.contract.chain);
- C5 hashes still live once the stream is known to have evicted everything
  (`StreamChecker.check_drained`);
- C6 the view disagrees with a snapshot of the pool (`StreamChecker.check_pool`).

Each violation names its rule, the batch and event it was found at and the
hashes that witness it, shortened; it is the smallest witness of that
anomaly, so one bad store gives one violation, not one per later event. A
C1 on a store of a sliding-window or Mamba group whose tokens span its
hashes carries K6's shape (harness.contract.reading). Given a `Reading`, the
checker replays only what that consumer reads: the events of the views it
drops are counted, not applied, and so are the stores it drops for their
block size.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import BinaryIO

from harness.contract.chain import HashModel, check_chain, sha256_hash_model
from harness.contract.quiet import QuietChecks
from harness.contract.reading import HASHLESS_SHAPE, K6_SHAPE, SPARSE_KINDS, Reading
from harness.contract.violation import (
    PARENT_NEVER_REPORTED,
    PARENT_REMOVED,
    Positions,
    ViewKey,
    Violation,
    view_order,
)
from harness.contract.wire import (
    AllBlocksCleared,
    BlockRemoved,
    ExternalBlockHash,
    KVCacheEvent,
    checked_events,
    token_count,
)
from harness.errors import UnreadableStream

__all__ = [
    "PARENT_NEVER_REPORTED",
    "PARENT_REMOVED",
    "HashModel",
    "StreamChecker",
    "Violation",
    "sha256_hash_model",
    "view_order",
]
# Why an event of a view that is read was not applied (`left_out`).
OTHER_BLOCK_SIZE = "block size"


# A group no event names: a view whose kind is not known yet is looked up
# again at its next event, until a store names its kind.
_UNLEARNED = object()


@dataclass
class StreamChecker(QuietChecks):
    """Replays events into multiset views and collects violations.

    Call `apply` once per batch, in stream order (or `apply_batches` with
    several, or `apply_payloads` with a capture's bytes); `check_pool` and
    `check_drained` at the points where their rule applies.
    """

    hash_model: HashModel | None = None
    # Record each hash's parent, which `check_pool` (C6) walks and which
    # witnesses name; off by default, it costs a third of the replay time.
    track_ancestry: bool = False
    # Per view: live hash -> number of stores not yet matched by a removal.
    views: dict[ViewKey, dict[ExternalBlockHash, int]] = field(default_factory=dict)
    # Per view, when tracking ancestry: hash -> (parent, batch of the store
    # that last made it live). Kept after the hash dies: a hash names its
    # prefix, so its parent never changes, and the next store that makes it
    # live overwrites the batch.
    stored: dict[ViewKey, dict[ExternalBlockHash, tuple]] = field(default_factory=dict)
    # The violations kept as witnesses: all of them, or the first
    # `witnesses_per_rule` of each rule and shape (`counts` counts every
    # one), so that a stream of millions of violations is checked in
    # bounded memory.
    violations: list[Violation] = field(default_factory=list)
    witnesses_per_rule: int | None = None
    counts: Counter = field(default_factory=Counter)
    # Violations found at an event, per (view, rule, shape); and every view
    # seen, with the KV cache spec kind its stores name (None until one does).
    view_counts: Counter = field(default_factory=Counter)
    view_kinds: dict[ViewKey, str | None] = field(default_factory=dict)
    # Stores of a hash that was already live (class K5: the view counts them).
    duplicate_stores: int = 0
    batches: int = 0
    events: int = 0
    # C4: engine chain value of every external hash verified so far.
    chain_values: dict[ExternalBlockHash, bytes] = field(default_factory=dict)
    # What one consumer reads (None: everything). The views it drops, and per
    # (view, why) the events not applied; per view, the hashes of the stores
    # it dropped for their block size, which removals may name.
    reading: Reading | None = None
    skipped: set[ViewKey] = field(default_factory=set)
    left_out: Counter = field(default_factory=Counter)
    dropped: dict[ViewKey, Counter] = field(default_factory=dict)
    _witnessed: Counter = field(default_factory=Counter, repr=False)
    _learned: set[ViewKey] = field(default_factory=set, repr=False)
    _position: Positions = field(default_factory=Positions, repr=False)
    _found: list | None = field(default=None, repr=False)

    def apply(self, events: list[KVCacheEvent]) -> list[Violation]:
        """Apply one batch's events in list order; return the violations
        found in it."""
        self._found = found = []
        try:
            self.apply_batches((events,))
        finally:
            self._found = None
        return found

    def apply_payloads(self, data: bytes | memoryview | BinaryIO) -> None:
        """Apply every KVEventBatch payload of a capture (bytes, or a binary
        stream read a chunk at a time), as check-stream reads one: each
        store's token ids left undecoded (harness.contract.wire's
        `StoredHead`)."""
        self.apply_batches(checked_events(data))

    def apply_batches(self, batches: Iterable[list]) -> None:
        """Apply each batch's events in list order, batch after batch."""
        view = self._view
        block_filter = None if self.reading is None else self.reading.block_size
        chain = self.hash_model is not None
        batch = self.batches - 1
        seen = duplicates = 0
        # The view changes with an event's (medium, group_idx), rarely, and
        # a batch may hold a single event: what the loop does not need per
        # event is looked up at a view change (`_view`), kept from batch to
        # batch, and the hash loops, the hot path, do their dict operations
        # inline. No index is kept per event (`Positions`).
        medium = group = live = None
        try:
            for events in batches:
                batch += 1
                seen += len(events)
                for event in events:
                    kind = type(event)
                    if kind is BlockRemoved:
                        if (
                            live is None
                            or event.group_idx != group
                            or event.medium != medium
                        ):
                            key, live, stored, dropped, group = view(
                                event, batch, events
                            )
                            medium = event.medium
                            if live is None:
                                continue
                        for block_hash in event.block_hashes:
                            count = live.pop(block_hash, 0)
                            if count > 1:
                                live[block_hash] = count - 1
                            elif not count:
                                self._unremovable(
                                    batch, events, event, block_hash, dropped
                                )
                        continue
                    if kind is AllBlocksCleared:
                        self.views.clear()
                        self.dropped.clear()
                        live = None
                        continue
                    if (
                        live is None
                        or event.group_idx != group
                        or event.medium != medium
                    ):
                        key, live, stored, dropped, group = view(event, batch, events)
                        medium = event.medium
                        if live is None:
                            continue
                    hashes = event.block_hashes
                    if block_filter is not None and event.block_size != block_filter:
                        dropped.update(hashes)
                        self.left_out[key, OTHER_BLOCK_SIZE] += 1
                        continue
                    spans = len(hashes) * event.block_size == token_count(
                        event.token_ids
                    )
                    parent = event.parent_block_hash
                    if parent is not None and parent not in live:
                        self._unplaced(batch, events, event, spans, stored)
                    if not spans:
                        self._unspanned(batch, events, event)
                    elif chain:
                        self._check_chain(batch, events, event)
                    # Two loops, so that the common case (no ancestry kept)
                    # tests nothing more per hash.
                    if stored is None:
                        for block_hash in hashes:
                            if block_hash in live:
                                live[block_hash] += 1
                                duplicates += 1
                            else:
                                live[block_hash] = 1
                        continue
                    for block_hash in hashes:
                        if block_hash in live:
                            live[block_hash] += 1
                            duplicates += 1
                        else:
                            live[block_hash] = 1
                            stored[block_hash] = (parent, batch)
                        parent = block_hash
        finally:
            self.batches = batch + 1
            self.events += seen
            self.duplicate_stores += duplicates

    def _view(self, event, batch: int, events: list) -> tuple:
        """The view an event's (medium, group_idx) names: ``(key, live
        hashes, ancestry, hashes dropped for their block size, the group the
        next event is compared with)``; live is None where the reading drops
        the view. A view whose kind no store has named yet is looked up
        again at its next event (`_UNLEARNED`)."""
        key = event.medium, event.group_idx
        group = event.group_idx
        kind = type(event)
        reading = self.reading
        if reading is not None and not self._reads(key, event, kind, batch, events):
            return key, None, None, None, group
        live = self.views.get(key)
        if live is None:
            live = self.views[key] = {}
            self.view_kinds.setdefault(key, None)
        if key not in self._learned:
            if kind is BlockRemoved:
                group = _UNLEARNED
            else:
                self._learned.add(key)
                self.view_kinds[key] = event.kv_cache_spec_kind
        stored = self.stored.setdefault(key, {}) if self.track_ancestry else None
        dropped = (
            None
            if reading is None or reading.block_size is None
            else self.dropped.setdefault(key, Counter())
        )
        return key, live, stored, dropped, group

    def _unremovable(self, batch, events, event, block_hash, dropped) -> None:
        """A removal of a hash that is not live: C2, but where the reading
        dropped a store of it for its block size."""
        if dropped and dropped[block_hash] > 0:
            dropped[block_hash] -= 1
            return
        self._violation(
            "C2", batch, events, event, "removed hash is not live", (block_hash,)
        )

    def _reads(self, key, event, kind, batch: int, events: list) -> bool:
        """Whether the reading keeps this event's view (learning the view's
        kind from a store); an event of a view it drops is counted there,
        and a store with no hash judged where a hashless store makes the
        consumer refuse its whole batch."""
        reading = self.reading
        if key not in self.skipped:
            known = self.view_kinds.get(key)
            if key not in self._learned and kind is not BlockRemoved:
                known = event.kv_cache_spec_kind
            if reading.reads_view(key[1], known):
                return True
            self.skipped.add(key)
            self.view_kinds[key] = known
            self.views.pop(key, None)  # what it applied before it knew
        self.left_out[key, reading.why_not(key[1], self.view_kinds[key])] += 1
        if (
            reading.refuses_hashless_batches
            and kind is not BlockRemoved
            and not event.block_hashes
            and token_count(event.token_ids)
        ):
            self._unspanned(batch, events, event, HASHLESS_SHAPE)
        return False

    def _unplaced(self, batch, events, event, spans: bool, stored) -> None:
        """C1, with what the stream shows of why: the parent's history where
        ancestry is kept, and K6's shape."""
        cause = None
        if stored is not None:
            seen = event.parent_block_hash in stored
            cause = PARENT_REMOVED if seen else PARENT_NEVER_REPORTED
        shape = K6_SHAPE if spans and event.kv_cache_spec_kind in SPARSE_KINDS else None
        self._violation(
            "C1", batch, events, event, "parent is not live", cause=cause, shape=shape
        )

    def _unspanned(self, batch: int, events: list, event, shape=None) -> None:
        """C3; token ids that are not an array make the batch unreadable."""
        tokens = token_count(event.token_ids)
        if tokens is None:
            raise UnreadableStream(
                f"batch {batch} event {self._position(events, event)}",
                "not a KVEventBatch: its token_ids are not an array",
            )
        self._violation(
            "C3",
            batch,
            events,
            event,
            f"{len(event.block_hashes)} hashes x block_size {event.block_size} "
            f"!= {tokens} tokens",
            shape=shape,
        )

    def _check_chain(self, batch: int, events: list, event) -> None:
        """C4 (harness.contract.chain): the first hash its tokens do not give."""
        found = check_chain(self.hash_model, self.chain_values, event)
        if found is not None:
            number, reported, rebuilt = found
            self._violation(
                "C4",
                batch,
                events,
                event,
                f"hash {number} is not the chain hash of its tokens "
                "(reported, rebuilt)",
                (reported, rebuilt),
            )

    def _violation(
        self,
        rule: str,
        batch: int,
        events: list,
        event: KVCacheEvent,
        detail: str,
        hashes: tuple | None = None,
        cause: str | None = None,
        shape: str | None = None,
    ) -> None:
        if hashes is None:
            hashes = (event.parent_block_hash, *event.block_hashes[:1])
        view = event.medium, event.group_idx
        index = self._position(events, event)
        violation = Violation(rule, batch, index, hashes, detail, cause, view, shape)
        self.view_counts[view, rule, shape] += 1
        if self._found is not None:
            self._found.append(violation)
        self._keep(violation)

    def _keep(self, violation: Violation) -> None:
        """Count a violation, and keep it as a witness if its rule (and
        shape) has room."""
        self.counts[violation.rule] += 1
        limit = self.witnesses_per_rule
        kind = violation.rule, violation.shape
        self._witnessed[kind] += 1
        if limit is None or self._witnessed[kind] <= limit:
            self.violations.append(violation)

    def counts_by_view(self, shape=None, every_shape: bool = True):
        """Per view that has any, the violations found at its events, by rule
        (those of every shape, or of ``shape`` only): one pass over the
        counts, however many views there are."""
        found: dict[ViewKey, dict[str, int]] = {}
        for (view, rule, its_shape), count in self.view_counts.items():
            if every_shape or its_shape == shape:
                rules = found.setdefault(view, {})
                rules[rule] = rules.get(rule, 0) + count
        return {
            view: dict(sorted(found[view].items()))
            for view in sorted(found, key=view_order)
        }

    @property
    def violation_count(self) -> int:
        """Every violation found, kept as a witness or not."""
        return sum(self.counts.values())
