"""The stream checker: replays KV events and reports contract violations.

Replays decoded events (harness.contract.wire) into one multiset view per
``(medium, group_idx)`` and reports every breach of the stream contract
(docs/contract.md) that a stream alone can show:

- C1 a stored block's parent is not live when the store is applied;
- C2 a removed hash is not live when the removal is applied;
- C3 ``len(block_hashes) * block_size != len(token_ids)``;
- C4 a reported hash is not the chain hash of the tokens leading to it
  (needs a `HashModel`);
- C5 hashes still live once the stream is known to have evicted everything
  (`StreamChecker.check_drained`);
- C6 the view disagrees with a snapshot of the pool (`StreamChecker.check_pool`).

Each violation names its rule, the batch and event it was found at and the
hashes that witness it, shortened; it is the smallest witness of that
anomaly, so one bad store gives one violation, not one per later event.
"""

from __future__ import annotations

import hashlib
import pickle
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.contract.wire import (
    AllBlocksCleared,
    BlockStored,
    ExternalBlockHash,
    KVCacheEvent,
    short_hash,
)


@dataclass(frozen=True)
class Violation:
    """One breach of a rule, with the hashes that witness it.

    ``batch`` and ``event`` locate the event at fault (None for findings that
    belong to the end of the stream or to a pool snapshot).
    """

    rule: str
    batch: int | None
    event: int | None
    hashes: tuple[ExternalBlockHash | None, ...]
    detail: str
    # What the stream shows about the cause, where the checker can tell:
    # for C1 with ancestry tracked, PARENT_NEVER_REPORTED or PARENT_REMOVED.
    cause: str | None = None
    # The view (medium, group) of a pool snapshot's finding (C6).
    view: ViewKey | None = None

    def __str__(self) -> str:
        where = "end of stream" if self.batch is None else f"batch {self.batch}"
        if self.event is not None:
            where += f" event {self.event}"
        witness = " ".join(short_hash(h) for h in self.hashes)
        cause = f" ({self.cause})" if self.cause else ""
        return f"{self.rule} at {where}: {self.detail}{cause} [{witness}]"


# Why a store's parent is not live, as far as the stream shows (C1).
PARENT_NEVER_REPORTED = "never reported"
PARENT_REMOVED = "reported and removed before"


@dataclass(frozen=True)
class HashModel:
    """How the engine derives block hashes, for rule C4.

    ``chunk_hash(parent, tokens, extra_keys)`` is the engine's chained hash of
    one ``hash_block_size`` chunk (``parent`` None for the first chunk);
    ``external`` turns it into the value events carry.
    """

    hash_block_size: int
    chunk_hash: Callable[[bytes | None, tuple[int, ...], Any], bytes]
    external: Callable[[bytes], ExternalBlockHash]


def sha256_hash_model(
    hash_block_size: int, none_hash: bytes, int_block_hashes: bool
) -> HashModel:
    """vLLM's sha256 block hash (vllm.utils.hashing.sha256 applied by
    kv_cache_utils.hash_block_tokens), from the engine's NONE_HASH; events
    carry the low 64 bits as an integer when ``int_block_hashes``."""

    def chunk_hash(parent, tokens, extra_keys):
        chained = (parent or none_hash, tokens, extra_keys)
        return hashlib.sha256(
            pickle.dumps(chained, protocol=pickle.HIGHEST_PROTOCOL)
        ).digest()

    def external(chain: bytes):
        if int_block_hashes:
            return int.from_bytes(chain, "big") & ((1 << 64) - 1)
        return chain

    return HashModel(hash_block_size, chunk_hash, external)


ViewKey = tuple[str | None, int | None]


def view_order(key: ViewKey) -> tuple:
    """Views in one order whatever their mix of None and values (a stream may
    name a medium in some stores and none in others): by medium, then group
    number, None first, and by repr for anything else."""
    medium, group = key
    return (
        medium is not None,
        medium if isinstance(medium, str) else "",
        group is not None,
        group if isinstance(group, int) else 0,
        repr(key),
    )


@dataclass
class StreamChecker:
    """Replays events into multiset views and collects violations.

    Call `apply` once per batch, in stream order; `check_pool` and
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
    # `witnesses_per_rule` of each rule (`counts` counts every one), so that a
    # stream of millions of violations is checked in bounded memory.
    violations: list[Violation] = field(default_factory=list)
    witnesses_per_rule: int | None = None
    counts: Counter = field(default_factory=Counter)
    # Violations found at an event, per (view, rule); and every view seen,
    # with the KV cache spec kind its stores name (None until one does).
    view_counts: Counter = field(default_factory=Counter)
    view_kinds: dict[ViewKey, str | None] = field(default_factory=dict)
    # Stores of a hash that was already live (class K5: the view counts them).
    duplicate_stores: int = 0
    batches: int = 0
    events: int = 0
    # C4: engine chain value of every external hash verified so far. A hash
    # names its whole prefix, so a verified value never goes stale.
    chain_values: dict[ExternalBlockHash, bytes] = field(default_factory=dict)

    def apply(self, events: list[KVCacheEvent]) -> list[Violation]:
        """Apply one batch's events in list order; return the violations
        found in it."""
        self._found = found = []
        batch = self.batches
        self.batches = batch + 1
        self.events += len(events)
        views = self.views
        duplicates = 0
        medium = group = live = None
        # The view changes with an event's (medium, group_idx), rarely, and a
        # batch may hold a single event: what the loop does not need per
        # event is looked up at a view change, and the hash loops, the hot
        # path, do their dict operations inline.
        for index, event in enumerate(events):
            kind = type(event)
            if kind is AllBlocksCleared:
                views.clear()
                live = None
                continue
            if live is None or event.group_idx != group or event.medium != medium:
                medium, group = key = event.medium, event.group_idx
                live = views.get(key)
                if live is None:
                    live = views[key] = {}
                    self.view_kinds.setdefault(key, None)
                stored = (
                    self.stored.setdefault(key, {}) if self.track_ancestry else None
                )
                if kind is BlockStored and self.view_kinds[key] is None:
                    self.view_kinds[key] = event.kv_cache_spec_kind
            if kind is BlockStored:
                parent = event.parent_block_hash
                if parent is not None and parent not in live:
                    cause = None
                    if stored is not None:
                        seen = parent in stored
                        cause = PARENT_REMOVED if seen else PARENT_NEVER_REPORTED
                    self._violation(
                        "C1", batch, index, event, "parent is not live", cause=cause
                    )
                hashes = event.block_hashes
                if len(hashes) * event.block_size != len(event.token_ids):
                    self._violation(
                        "C3",
                        batch,
                        index,
                        event,
                        f"{len(hashes)} hashes x block_size {event.block_size} "
                        f"!= {len(event.token_ids)} tokens",
                    )
                elif self.hash_model is not None:  # C3 failed: tokens unplaceable
                    self._check_chain(batch, index, event)
                # Two loops, so that the common case (no ancestry kept) tests
                # nothing more per hash.
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
                continue
            for block_hash in event.block_hashes:
                try:
                    count = live[block_hash]
                except KeyError:
                    self._violation(
                        "C2",
                        batch,
                        index,
                        event,
                        "removed hash is not live",
                        (block_hash,),
                    )
                    continue
                if count == 1:
                    del live[block_hash]
                else:
                    live[block_hash] = count - 1
        if duplicates:
            self.duplicate_stores += duplicates
        return found

    def _violation(
        self,
        rule: str,
        batch: int,
        index: int,
        event: KVCacheEvent,
        detail: str,
        hashes: tuple | None = None,
        cause: str | None = None,
    ) -> None:
        if hashes is None:
            hashes = (event.parent_block_hash, *event.block_hashes[:1])
        violation = Violation(rule, batch, index, hashes, detail, cause)
        self.view_counts[(event.medium, event.group_idx), rule] += 1
        self._found.append(violation)
        self._keep(violation)

    def _keep(self, violation: Violation) -> None:
        """Count a violation, and keep it as a witness if its rule has room."""
        self.counts[violation.rule] += 1
        limit = self.witnesses_per_rule
        if limit is None or self.counts[violation.rule] <= limit:
            self.violations.append(violation)

    def counts_by_view(self) -> dict[ViewKey, dict[str, int]]:
        """Per view that has any, the violations found at its events, by rule:
        one pass over the counts, however many views there are."""
        found: dict[ViewKey, dict[str, int]] = {}
        for (view, rule), count in self.view_counts.items():
            found.setdefault(view, {})[rule] = count
        return {
            view: dict(sorted(found[view].items()))
            for view in sorted(found, key=view_order)
        }

    @property
    def violation_count(self) -> int:
        """Every violation found, kept as a witness or not."""
        return sum(self.counts.values())

    def _check_chain(self, batch: int, index: int, event: BlockStored) -> None:
        """C4: chain-hash the event's tokens from its parent's chain value.

        The parent's chain value was itself rebuilt from the tokens along its
        own parent chain, so this rebuilds the whole prefix. Stores whose
        parent's value is unknown (no verified store of it yet) are skipped.
        """
        model = self.hash_model
        hbs = model.hash_block_size
        block_size = event.block_size
        tokens = event.token_ids
        extra_keys = event.extra_keys or ()
        parent = event.parent_block_hash
        chain = None if parent is None else self.chain_values.get(parent)
        if (parent is not None and chain is None) or block_size % hbs:
            return
        for index, block_hash in enumerate(event.block_hashes):
            block_extra = extra_keys[index] if index < len(extra_keys) else None
            start = index * block_size
            for chunk_start in range(start, start + block_size, hbs):
                chunk = tuple(tokens[chunk_start : chunk_start + hbs])
                chain = model.chunk_hash(chain, chunk, block_extra)
            rebuilt = model.external(chain)
            if rebuilt != block_hash:
                self._violation(
                    "C4",
                    batch,
                    index,
                    event,
                    f"hash {index} is not the chain hash of its tokens "
                    "(reported, rebuilt)",
                    (block_hash, rebuilt),
                )
                return
            self.chain_values[block_hash] = chain

    def check_pool(self, held: Mapping[ViewKey, Iterable[ExternalBlockHash]]) -> None:
        """C6: compare the views with the hashes a pool holds at a quiet point.

        Every held hash must be live; every live hash the pool does not hold
        must be an ancestor (through live parents) of a held hash.
        """
        if not self.track_ancestry:
            raise ValueError("check_pool needs StreamChecker(track_ancestry=True)")
        batch = self.batches - 1
        for key in sorted(set(self.views) | set(held), key=repr):
            live = self.views.get(key, {})
            stored = self.stored.get(key, {})
            held_hashes = set(held.get(key, ()))
            reachable = set()
            for block_hash in held_hashes:
                if block_hash not in live:
                    self._keep(
                        Violation(
                            "C6",
                            batch,
                            None,
                            (block_hash,),
                            f"view {key}: pool holds a hash that is not live",
                            view=key,
                        )
                    )
                    continue
                parent = stored[block_hash][0]
                while parent in live and parent not in reachable:
                    reachable.add(parent)
                    parent = stored[parent][0]
            for block_hash in live:
                if block_hash not in held_hashes and block_hash not in reachable:
                    self._keep(
                        Violation(
                            "C6",
                            batch,
                            None,
                            (block_hash,),
                            f"view {key}: live hash stored in batch "
                            f"{stored[block_hash][1]} is neither held by the pool "
                            "nor an ancestor of a held hash",
                            view=key,
                        )
                    )

    def check_drained(self) -> None:
        """C5: the stream evicted everything, so every view must be empty."""
        for key, live in sorted(self.views.items(), key=lambda item: repr(item[0])):
            stored = self.stored.get(key, {})
            for block_hash, count in live.items():
                origin = (
                    f"; stored in batch {stored[block_hash][1]}"
                    if block_hash in stored
                    else ""
                )
                self._keep(
                    Violation(
                        "C5",
                        None,
                        None,
                        (block_hash,),
                        f"view {key}: still live x{count} after eviction "
                        f"of everything{origin}",
                    )
                )

    def live_count(self, key: ViewKey, block_hash: ExternalBlockHash) -> int:
        return self.views.get(key, {}).get(block_hash, 0)
