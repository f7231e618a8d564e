"""llm-d's rules for vLLM's KV events, as a `Router`: a model, written from
its source, not llm-d itself (llm-d's router is Go and does not run here).

Read from llm-d-kv-cache (``pkg/kvevents/pool.go``: ``digestEvents``, the
parent's engine key looked up with ``index.GetRequestKey`` and the store's
tokens re-hashed by ``tokenProcessor.TokensToKVBlockKeys`` from the parent's
request key; ``pkg/kvevents/engineadapter/vllm_adapter.go``: hashes as
64-bit integers) and, for the rules its newer releases add (the kind and
dense checks, a store under an unmappable parent dropped, refcounted
removal, AllBlocksCleared), from a reading of llm-d-router's source noted
beside this project, not re-read here. What the model does with each event:

- a store of a kind other than full, MLA or sink attention is skipped (no
  kind: attention, as a release before ``kv_cache_spec_kind``);
- a store that is not dense is skipped: ``len(tokens) % block_size != 0``
  or ``len(tokens) / block_size != len(hashes)``;
- a store's parent engine key must map to a request key, else the store is
  dropped; no parent starts a chain;
- its tokens are re-hashed at the canonical block size (`LlmdModel`'s
  ``block_size``), chained from the parent's request key; a trailing part
  of fewer tokens yields no key; engine key ``i`` maps to the request keys
  whose blocks end inside its block (the ratio of the two block sizes), and
  a parent maps to the last of its keys;
- a removal drops one reference of each request key its engine key maps to
  (refcounted, per medium); a removal carries no kind, so the model, like
  the code it was read from, does not tell one group's removal from
  another's (an assumption: no group filter on removals was found);
- AllBlocksCleared clears everything.

A request is predicted as the longest prefix of its canonical keys (its
tokens chained from the start in canonical blocks) that the index holds in
the engine's medium, in tokens.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from harness.contract.wire import (
    AllBlocksCleared,
    BlockStored,
    ExternalBlockHash,
    decode_event,
)
from harness.routers.router import EngineLayout

ATTENTION_KINDS = frozenset({"full_attention", "mla_attention", "sink_full_attention"})
ROOT = 0  # the request key a chain without a parent starts from


def request_keys(parent: int, token_ids: list[int], block_size: int) -> list[int]:
    """The chain of request keys of ``token_ids`` in whole canonical blocks,
    from ``parent``."""
    keys = []
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = hash((parent, tuple(token_ids[start : start + block_size])))
        keys.append(parent)
    return keys


def dense(event: BlockStored) -> bool:
    tokens, size = len(event.token_ids), event.block_size
    return size > 0 and tokens % size == 0 and tokens // size == len(event.block_hashes)


@dataclass
class LlmdModel:
    """llm-d's rules (module docstring) at canonical block size
    ``block_size``, for one engine of layout ``layout``."""

    layout: EngineLayout
    block_size: int
    # medium -> request key -> references
    held: dict[str | None, Counter] = field(default_factory=dict)
    # (medium, engine key) -> (its request keys, references)
    engine: dict[tuple[str | None, ExternalBlockHash], list] = field(
        default_factory=dict
    )
    counts: Counter = field(default_factory=Counter)

    def publish(self, events: list[bytes]) -> None:
        for data in events:
            self.apply(decode_event(data))

    def apply(self, event) -> None:
        if isinstance(event, AllBlocksCleared):
            self.held.clear()
            self.engine.clear()
            self.counts["cleared"] += 1
        elif isinstance(event, BlockStored):
            self.counts[self._store(event)] += 1
        else:
            self._remove(event.medium, event.block_hashes)

    def _store(self, event: BlockStored) -> str:
        kind = event.kv_cache_spec_kind
        if kind is not None and kind not in ATTENTION_KINDS:
            return "stores skipped: kind not attention"
        if not dense(event):
            return "stores skipped: not dense"
        medium = event.medium
        parent = ROOT
        if event.parent_block_hash is not None:
            mapped = self.engine.get((medium, event.parent_block_hash))
            if mapped is None or not mapped[0]:
                return "stores dropped: parent not mapped"
            parent = mapped[0][-1]
        keys = request_keys(parent, event.token_ids, self.block_size)
        held = self.held.setdefault(medium, Counter())
        for index, engine_key in enumerate(event.block_hashes):
            start, end = index * event.block_size, (index + 1) * event.block_size
            mine = [
                key
                for number, key in enumerate(keys)
                if start < (number + 1) * self.block_size <= end
            ]
            entry = self.engine.setdefault((medium, engine_key), [mine, 0])
            entry[0] = mine
            entry[1] += 1
            held.update(mine)
        return "stores indexed" if keys else "stores indexed with no key"

    def _remove(self, medium, block_hashes) -> None:
        held = self.held.get(medium, Counter())
        for engine_key in block_hashes:
            entry = self.engine.get((medium, engine_key))
            if entry is None:
                self.counts["removals of an engine key not mapped"] += 1
                continue
            for key in entry[0]:
                held[key] -= 1
                if held[key] <= 0:
                    del held[key]
            entry[1] -= 1
            if entry[1] <= 0:
                del self.engine[medium, engine_key]
            self.counts["removals applied"] += 1

    def settle(self) -> None:
        """Applied as published."""

    def predict(self, token_ids, block_hashes) -> int:
        held = self.held.get(self.layout.medium, Counter())
        matched = 0
        for key in request_keys(ROOT, list(token_ids), self.block_size):
            if held[key] <= 0:
                break
            matched += 1
        return matched * self.block_size

    def ledger(self) -> Counter:
        return +self.counts

    def close(self) -> None:
        """Nothing to release."""
