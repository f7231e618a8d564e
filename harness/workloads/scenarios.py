"""Scripted workloads: fixed sequences of pool calls, each reaching one path
the seeded drivers reach only by chance.

- ``seed-1800``: the seed report's case (hbs 128, block 1536, an 1800-token
  prompt: its partial entry names H1664, which no event reported).
- ``s1-*``: a partial entry whose cache block starts at a hash the pool no
  longer holds, while the boundary before the entry is live as a copy in
  another block (hbs 2, block 12, 18-token prompts; docs/contract.md, class
  K4 after a Mamba group's null block, K6 after a full-attention block
  evicted in use). Pristine's store of the entry resolves there; the series
  must not add a parent that does not.

Every scenario frees its blocks at the end; the runner then evicts
everything (harness.workloads.workloads.run_scenario).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.workloads.compat import replacement
from harness.workloads.pool_driver import PoolDriver
from harness.workloads.requests import make_request

# A step drives the pool and returns the operation's name.
Step = Callable[[Any], str]


@dataclass(frozen=True)
class Scenario:
    hash_block_size: int
    block_size: int
    num_blocks: int
    # Builds the steps for one pool (they share the requests and blocks they
    # allocate through the closure).
    steps: Callable[[Any], list[Step]]
    # The group's kind, as labels and classes see it: null blocks belong to
    # Mamba and sliding-window groups.
    group_kind: str = "full_attention"

    def driver(self) -> PoolDriver:
        driver = PoolDriver(
            random.Random(0), self.hash_block_size, self.block_size, self.num_blocks
        )
        driver.group_kinds = [self.group_kind]
        return driver


def seed_1800(pool) -> list[Step]:
    request = make_request("seed", list(range(1800)), 128)
    blocks = pool.get_new_blocks(2)

    def cache(pool) -> str:
        pool.cache_full_blocks(request, blocks, 0, 1, 1536, 0)
        pool.cache_partial_block(request, blocks[1], 1792, 0, 1536)
        return "cache-1800-token-prompt"

    def free(pool) -> str:
        pool.free_blocks(blocks[::-1])
        return "free"

    return [cache, free]


def evicted_block_start(replace: bool) -> Callable[[Any], list[Step]]:
    """Two requests with the same 18 tokens, in their own blocks. A holds its
    full block H12 and the partial entry H14; B its full block H12 and,
    unless ``replace``, nothing else. Both copies of H12 are evicted while in
    use; then B registers an entry at 16: first registration in its second
    block, or (``replace``) B's copy of H14 replaced there. Its parent H14 is
    live as A's entry; its cache block's start H12 is held nowhere."""

    def steps(pool) -> list[Step]:
        tokens = list(range(18))
        a, b = make_request("a", tokens, 2), make_request("b", tokens, 2)
        a_blocks, b_blocks = pool.get_new_blocks(2), pool.get_new_blocks(2)

        def cache(pool) -> str:
            for request, blocks in ((a, a_blocks), (b, b_blocks)):
                pool.cache_full_blocks(request, blocks, 0, 1, 12, 0)
            pool.cache_partial_block(a, a_blocks[1], 14, 0, 12)
            if replace:
                pool.cache_partial_block(b, b_blocks[1], 14, 0, 12)
            return "cache-two-copies"

        def invalidate(pool) -> str:
            pool.evict_blocks({a_blocks[0].block_id, b_blocks[0].block_id})
            return "evict-block-starts-in-use"

        def register(pool) -> str:
            pool.cache_partial_block(
                b, b_blocks[1], 16, 0, 12, **replacement(pool, replace)
            )
            return "replace-entry-at-16" if replace else "register-entry-at-16"

        def free(pool) -> str:
            pool.free_blocks(a_blocks[::-1] + b_blocks[::-1])
            return "free"

        return [cache, invalidate, register, free]

    return steps


def null_block_start(pool) -> list[Step]:
    """Two requests with the same 18 tokens whose first cache block is the
    null block (a Mamba manager in align mode allocated nothing there: its
    full-block store carries the tokens and no hash, class K4). A registers
    H14 (its
    parent H12 was never stored: pristine's own unresolved parent), then B
    registers H16 under the live H14, with no eviction at all."""
    tokens = list(range(18))
    a, b = make_request("a", tokens, 2), make_request("b", tokens, 2)
    a_blocks = [pool.null_block, *pool.get_new_blocks(1)]
    b_blocks = [pool.null_block, *pool.get_new_blocks(1)]

    def cache(pool) -> str:
        for request, blocks in ((a, a_blocks), (b, b_blocks)):
            pool.cache_full_blocks(request, blocks, 0, 1, 12, 0)
        pool.cache_partial_block(a, a_blocks[1], 14, 0, 12)
        return "cache-after-null-blocks"

    def register(pool) -> str:
        pool.cache_partial_block(b, b_blocks[1], 16, 0, 12)
        return "register-entry-at-16"

    def free(pool) -> str:
        pool.free_blocks(a_blocks[::-1] + b_blocks[::-1])
        return "free"

    return [cache, register, free]


SEED_EXAMPLE = "seed-1800"
SCENARIOS: dict[str, Scenario] = {
    SEED_EXAMPLE: Scenario(128, 1536, 12, seed_1800),
    "s1-evicted-start": Scenario(2, 12, 8, evicted_block_start(replace=False)),
    "s1-evicted-start-replace": Scenario(2, 12, 8, evicted_block_start(replace=True)),
    "s1-null-start": Scenario(2, 12, 8, null_block_start, group_kind="mamba"),
}
