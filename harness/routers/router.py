"""A KV-aware router's view of one engine, built from its KV events alone.

`RouterIndex` is what a router can index from the stream: per view
``(medium, group_idx)`` a multiset of block hashes. Parent-refusing (the
default), a `BlockStored` whose parent is not indexed in its view is not
indexed at all (Dynamo's radix tree refuses it; llm-d drops it); without
that check (``refuse_orphans=False``) every announced hash is indexed, as a
router that keeps the multiset of announced hashes does (vllm-router's
keying, Dynamo's hybrid prototype). A removal of a hash that is not indexed
is ignored; `AllBlocksCleared` empties every view. Nothing else is assumed
of a store: it may carry any number of hashes, of any block size.

`predict` turns any such holding, the router's index or a snapshot of the
pool itself, into the hit the engine would serve a request, by vLLM's own
rules (vllm/v1/core/single_type_kv_cache_manager.py and
kv_cache_coordinator.py, 0.30 to 0.33), applied to the request's chain of
hashes at hash-block granularity (``request.block_hashes``, as events carry
them). Hits never cover the whole prompt: the lookup is capped at
``num_tokens - 1``.

- Full attention: the longest run of held full-block boundaries from the
  start, then, when the alignment is finer than the block (partial hash hits),
  the highest held boundary inside the next block; rounded down to the
  alignment. A hit at L serves every shorter aligned length.
- Mamba: the highest held boundary (at the alignment when finer than the
  block, else at the block size, aligned); the state at exactly L is needed.
- Sliding window: the rightmost aligned block boundary whose window of
  ``cdiv(window - 1, block_size)`` blocks is held, else the run of held
  blocks from the start, trimmed to the alignment.
- Combined (several groups): the coordinator's fixed point: full-attention
  groups first, each group lowering the candidate until none does.

Groups with one spec are looked up jointly, as the coordinator does: a
boundary is held only if every one of them holds it. No vLLM is imported.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from harness.contract.wire import (
    AllBlocksCleared,
    BlockStored,
    ExternalBlockHash,
    KVCacheEvent,
)

FULL_ATTENTION = "full_attention"
MAMBA = "mamba"
SLIDING_WINDOW = "sliding_window"
KINDS = (FULL_ATTENTION, MAMBA, SLIDING_WINDOW)


@dataclass(frozen=True)
class GroupLayout:
    """One KV cache group as the engine configures it."""

    kind: str  # KINDS
    block_size: int
    sliding_window: int | None = None  # tokens, for SLIDING_WINDOW


@dataclass(frozen=True)
class EngineLayout:
    """What a router is configured with for one engine: the hash block size,
    the coordinator's cache-hit alignment (``hash_block_size`` when partial
    hash hits are on, else the scheduler block size; a single full-attention
    group driven through its pool uses ``hash_block_size`` where its manager
    looks hash blocks up, vLLM 0.26 on, and its block size before: whole
    blocks) and the groups in group-index order."""

    hash_block_size: int
    alignment: int
    groups: tuple[GroupLayout, ...]
    medium: str | None = None

    def __post_init__(self):
        for group in self.groups:
            if group.kind not in KINDS:
                raise ValueError(f"group kind {group.kind!r} is not one of {KINDS}")
            if group.kind == SLIDING_WINDOW and not group.sliding_window:
                raise ValueError("a sliding-window group needs its window")
            if group.block_size % self.hash_block_size:
                raise ValueError(
                    f"block size {group.block_size} is not a multiple of the "
                    f"hash block size {self.hash_block_size}"
                )


ViewKey = tuple[str | None, int]


def view_key(medium: str | None, group_idx: int | None) -> ViewKey:
    # A release that omits group_idx has one group, index 0.
    return (medium, group_idx or 0)


@dataclass
class RouterIndex:
    """The hashes a router indexes from the stream, per view (module
    docstring). `refused` counts the stores it could not place;
    `refused_views` holds the views that refused one since the last
    AllBlocksCleared; `orphans` counts the stores it indexed under a parent
    it did not hold (``refuse_orphans`` False)."""

    views: dict[ViewKey, Counter] = field(default_factory=dict)
    refused: int = 0
    refused_views: set[ViewKey] = field(default_factory=set)
    refuse_orphans: bool = True
    orphans: int = 0

    def apply(self, event: KVCacheEvent) -> None:
        if isinstance(event, AllBlocksCleared):
            self.views.clear()
            self.refused_views.clear()
            return
        key = view_key(event.medium, event.group_idx)
        view = self.views.setdefault(key, Counter())
        if isinstance(event, BlockStored):
            parent = event.parent_block_hash
            if parent is not None and view[parent] <= 0:
                if not self.refuse_orphans:
                    self.orphans += 1
                    view.update(event.block_hashes)
                    return
                self.refused += 1
                self.refused_views.add(key)
                return
            view.update(event.block_hashes)
            return
        for block_hash in event.block_hashes:
            if view[block_hash] > 0:
                view[block_hash] -= 1

    def apply_all(self, events: Iterable[KVCacheEvent]) -> None:
        for event in events:
            self.apply(event)

    def holding(self, medium: str | None) -> Holding:
        """Group index -> whether the group holds a hash, for `predict`."""
        return {
            group: (lambda block_hash, view=view: view[block_hash] > 0)
            for (view_medium, group), view in self.views.items()
            if view_medium == medium
        }


# Group index -> "does this group hold that hash".
Holding = dict[int, Callable[[ExternalBlockHash], bool]]


def hash_sets(held: dict[int, Iterable[ExternalBlockHash]]) -> Holding:
    """A `Holding` of plain hash collections (a pool snapshot, say)."""
    return {group: set(hashes).__contains__ for group, hashes in held.items()}


class Prediction(NamedTuple):
    """A hit in tokens: every group together, and each group alone."""

    combined: int
    per_group: tuple[int, ...]


def predict(
    layout: EngineLayout,
    holding: Holding,
    block_hashes: Sequence[ExternalBlockHash],
    num_tokens: int,
) -> Prediction:
    """The hit the engine would serve a request of ``num_tokens`` tokens whose
    hashes at each hash-block boundary are ``block_hashes``, if its groups
    held what ``holding`` says: combined and per group."""
    lookup = _Lookup(layout, holding, block_hashes)
    cap = num_tokens - 1
    per_group = [0] * len(layout.groups)
    for members in lookup.spec_groups:
        hit = lookup.group_hit(members, cap)
        for group in members:
            per_group[group] = hit
    return Prediction(lookup.combined(cap), tuple(per_group))


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class _Lookup:
    """vLLM's finders over one holding, for one request."""

    def __init__(self, layout, holding, block_hashes):
        self.layout = layout
        self.holding = holding
        self.block_hashes = block_hashes
        specs: dict[GroupLayout, list[int]] = {}
        for index, group in enumerate(layout.groups):
            specs.setdefault(group, []).append(index)
        # Full attention first (a stable sort, as the coordinator's).
        self.spec_groups = sorted(
            specs.values(),
            key=lambda members: self.spec(members).kind != FULL_ATTENTION,
        )

    def spec(self, members: list[int]) -> GroupLayout:
        return self.layout.groups[members[0]]

    def held(self, members: list[int], boundary: int) -> bool:
        """Every member group holds the request's hash at ``boundary`` tokens."""
        index = boundary // self.layout.hash_block_size - 1
        if not 0 <= index < len(self.block_hashes):
            return False
        block_hash = self.block_hashes[index]
        return all(
            group in self.holding and self.holding[group](block_hash)
            for group in members
        )

    def group_hit(self, members: list[int], max_length: int) -> int:
        kind = self.spec(members).kind
        if kind == FULL_ATTENTION:
            return self.full_attention_hit(members, max_length)
        if kind == MAMBA:
            return self.mamba_hit(members, max_length)
        return self.sliding_window_hit(members, max_length)

    def _fine(self, block_size: int) -> bool:
        alignment = self.layout.alignment
        return alignment < block_size and block_size % alignment == 0

    def _num_blocks(self, block_size: int) -> int:
        hashes_per_block = block_size // self.layout.hash_block_size
        return len(self.block_hashes) // hashes_per_block

    def full_attention_hit(self, members: list[int], max_length: int) -> int:
        block_size = self.spec(members).block_size
        alignment = self.layout.alignment
        num_blocks = 0
        limit = min(max_length // block_size, self._num_blocks(block_size))
        while num_blocks < limit and self.held(members, (num_blocks + 1) * block_size):
            num_blocks += 1
        hit = num_blocks * block_size
        if self._fine(block_size):
            scale = block_size // alignment
            first = num_blocks * scale
            last = min(
                first + scale - 1, max_length // alignment, len(self.block_hashes)
            )
            for fine in range(last - 1, first - 1, -1):
                if self.held(members, (fine + 1) * alignment):
                    hit = (fine + 1) * alignment
                    break
        return hit - hit % alignment

    def mamba_hit(self, members: list[int], max_length: int) -> int:
        block_size = self.spec(members).block_size
        alignment = self.layout.alignment
        if self._fine(block_size):
            units = min(max_length // alignment, len(self.block_hashes))
            for fine in range(units - 1, -1, -1):
                if self.held(members, (fine + 1) * alignment):
                    return (fine + 1) * alignment
            return 0
        for block in range(max_length // block_size - 1, -1, -1):
            end = (block + 1) * block_size
            if self.held(members, end):
                if block_size != alignment and end % alignment:
                    continue
                return end
        return 0

    def sliding_window_hit(self, members: list[int], max_length: int) -> int:
        spec = self.spec(members)
        block_size, alignment = spec.block_size, self.layout.alignment
        needed = cdiv(spec.sliding_window - 1, block_size)
        contiguous = 0
        for block in range(max_length // block_size - 1, -1, -1):
            if not self.held(members, (block + 1) * block_size):
                contiguous = 0
                continue
            # The run's right end must sit on the alignment.
            if contiguous == 0 and (block + 1) * block_size % alignment:
                continue
            contiguous += 1
            if contiguous >= needed:
                return (block + contiguous) * block_size
        # The run from the start is a hit even if shorter than the window.
        hit = contiguous * block_size
        return hit - hit % alignment

    def combined(self, max_length: int) -> int:
        """The coordinator's fixed point (HybridKVCacheCoordinator): each
        group lowers the candidate; full attention, downward-closed, is
        looked up once and trimmed after."""
        if len(self.spec_groups) == 1:
            return self.group_hit(self.spec_groups[0], max_length)
        hit = max_length
        full_attention: dict[int, int] = {}
        while True:
            candidate = hit
            for position, members in enumerate(self.spec_groups):
                if position in full_attention:
                    candidate = min(candidate, full_attention[position])
                    continue
                candidate = self.group_hit(members, candidate)
                if self.spec(members).kind == FULL_ATTENTION:
                    full_attention[position] = candidate
            if candidate >= hit:
                return hit
            hit = candidate
