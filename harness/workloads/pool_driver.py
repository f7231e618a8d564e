"""A seeded driver of vLLM's `BlockPool`, as upstream's prefix-cache tests use it.

Requests sharing prefixes, extensions, prompt-tail partial entries inside and
past the first cache block, promotions, replacement, frees, eviction
pressure, ``evict_blocks`` of cached blocks and of blocks in use, and
``reset_prefix_cache``, one seeded operation a step. (Null blocks belong to
the managers of sliding-window and Mamba groups: harness.workloads.manager_driver,
and the scripted harness.workloads.scenarios.)
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from harness.workloads.compat import block_hashes_at, can_replace_existing_hashes
from harness.workloads.requests import VOCAB, Prompts, cdiv


@dataclass
class Running:
    request: Any
    blocks: list
    num_cached_blocks: int


@dataclass
class PoolDriver:
    """Drives a BlockPool the way its callers do, one seeded operation a step."""

    rng: random.Random
    hash_block_size: int
    block_size: int
    num_blocks: int
    running: list[Running] = field(default_factory=list)

    def __post_init__(self):
        from vllm.v1.core.block_pool import BlockPool

        self.pool = BlockPool(
            num_gpu_blocks=self.num_blocks,
            enable_caching=True,
            hash_block_size=self.hash_block_size,
            enable_kv_cache_events=True,
        )
        self.group_kinds = ["full_attention"]
        self.block_sizes = [self.block_size]
        self.prompts = Prompts(self.rng, 3 * self.block_size, self.hash_block_size)

    # Operation -> weight.
    OPS = {
        "new": 30,
        "extend": 22,
        "free": 16,
        "pressure": 10,
        "evict": 8,
        "invalidate": 4,
        "replace": 5,
        "abort": 4,
        "reset": 2,
    }

    def step(self) -> str:
        name = self.rng.choices(list(self.OPS), list(self.OPS.values()))[0]
        getattr(self, f"op_{name}")()
        return name

    # -- operations ---------------------------------------------------------

    def op_new(self) -> None:
        bs, hbs = self.block_size, self.hash_block_size
        request = self.prompts.next_request()
        length = request.num_tokens
        hits = [] if self.rng.random() < 0.2 else self._cache_hits(request)
        num_blocks = cdiv(length, bs)
        needed = num_blocks - len(hits)
        reclaimed = sum(1 for block in hits if block.ref_cnt == 0)
        if needed > self.pool.get_num_free_blocks() - reclaimed:
            return
        self.pool.touch(hits)
        blocks = hits + self.pool.get_new_blocks(needed)
        self.pool.cache_full_blocks(
            request=request,
            blocks=blocks,
            num_cached_blocks=len(hits),
            num_full_blocks=length // bs,
            block_size=bs,
            kv_cache_group_id=0,
        )
        # The prompt tail, as FullAttentionManager._cache_partial_tail_block.
        boundary = min((length - 1) // hbs, len(request.block_hashes)) * hbs
        if boundary and boundary % bs:
            self.pool.cache_partial_block(
                request=request,
                block=blocks[boundary // bs],
                num_tokens=boundary,
                kv_cache_group_id=0,
                block_size=bs,
            )
        self.running.append(Running(request, blocks, length // bs))

    def op_extend(self) -> None:
        """Decode or extension tokens; maybe register the new tail boundary."""
        if not self.running:
            return
        running = self.rng.choice(self.running)
        request, bs = running.request, self.block_size
        new_tokens = [self.rng.randrange(VOCAB) for _ in range(self.rng.randint(1, bs))]
        num_tokens = request.num_tokens + len(new_tokens)
        needed = cdiv(num_tokens, bs) - len(running.blocks)
        if needed > self.pool.get_num_free_blocks():
            return
        request.append_output_token_ids(new_tokens)
        running.blocks += self.pool.get_new_blocks(needed)
        self.pool.cache_full_blocks(
            request=request,
            blocks=running.blocks,
            num_cached_blocks=running.num_cached_blocks,
            num_full_blocks=num_tokens // bs,
            block_size=bs,
            kv_cache_group_id=0,
        )
        running.num_cached_blocks = num_tokens // bs
        boundary = num_tokens // self.hash_block_size * self.hash_block_size
        if boundary % bs and self.rng.random() < 0.6:
            self.pool.cache_partial_block(
                request=request,
                block=running.blocks[boundary // bs],
                num_tokens=boundary,
                kv_cache_group_id=0,
                block_size=bs,
            )

    def op_free(self) -> None:
        if not self.running:
            return
        running = self.running.pop(self.rng.randrange(len(self.running)))
        # Managers free tail first so tails are evicted first; sometimes not.
        order = running.blocks[::-1] if self.rng.random() < 0.8 else running.blocks
        self.pool.free_blocks(order)

    def op_pressure(self) -> None:
        """Another request's uncached allocation evicts LRU cached blocks."""
        free = self.pool.get_num_free_blocks()
        if free:
            self.pool.free_blocks(self.pool.get_new_blocks(self.rng.randint(1, free)))

    def op_evict(self) -> None:
        """A connector evicts cached blocks nobody is using."""
        cached = [
            block.block_id
            for block in self.pool.blocks
            if block.ref_cnt == 0 and block.block_hash is not None
        ]
        if cached:
            chosen = self.rng.sample(cached, self.rng.randint(1, len(cached)))
            self.pool.evict_blocks(set(chosen))

    def op_invalidate(self) -> None:
        """A connector invalidates some cached blocks of a running request
        (a failed KV load): they leave the prefix cache and stay allocated."""
        if not self.running:
            return
        running = self.rng.choice(self.running)
        cached = [block.block_id for block in running.blocks if block.block_hash]
        if cached:
            chosen = self.rng.sample(cached, self.rng.randint(1, len(cached)))
            self.pool.evict_blocks(set(chosen))

    def op_replace(self) -> None:
        """Re-key a request's tail block in place (a Mamba checkpoint does)."""
        if not self.running or not can_replace_existing_hashes(self.pool):
            return
        running = self.rng.choice(self.running)
        request, bs = running.request, self.block_size
        boundary = request.num_tokens // self.hash_block_size * self.hash_block_size
        if boundary % bs == 0 or running.blocks[boundary // bs].ref_cnt != 1:
            return
        self.pool.cache_partial_block(
            request=request,
            block=running.blocks[boundary // bs],
            num_tokens=boundary,
            kv_cache_group_id=0,
            block_size=bs,
            replace_existing_hashes=True,
        )

    def op_abort(self) -> None:
        """A failed KV load: evict a request's private blocks, then free it."""
        if not self.running:
            return
        running = self.running.pop(self.rng.randrange(len(self.running)))
        private = {block.block_id for block in running.blocks if block.ref_cnt == 1}
        self.pool.evict_blocks(private)
        self.pool.free_blocks(running.blocks[::-1])

    def op_reset(self) -> None:
        self.free_all()
        assert self.pool.reset_prefix_cache()

    # -- helpers ------------------------------------------------------------

    def _cache_hits(self, request: Any) -> list:
        block_hashes = block_hashes_at(
            request.block_hashes, self.hash_block_size, self.block_size
        )
        hits = []
        for index in range((request.num_tokens - 1) // self.block_size):
            cached = self.pool.get_cached_block(block_hashes[index], [0])
            if cached is None:
                break
            hits.append(cached[0])
        return hits

    def free_all(self) -> None:
        while self.running:
            self.pool.free_blocks(self.running.pop().blocks[::-1])
