"""The workload configurations, and evicting everything at the end of a run.

``pool-HBSxBS`` drives `BlockPool` directly (harness.workloads.pool_driver);
``manager-*`` drives `KVCacheManager` with hybrid group layouts
(harness.workloads.manager_driver). FULL_REPORT_CONFIGS run two of them with
every request in KV-event report mode "full".
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from harness.workloads.manager_driver import ManagerDriver
from harness.workloads.pool_driver import PoolDriver

# Besides the seeded drivers of CONFIGS, scripted workloads
# (harness.workloads.scenarios) reach one path each.


def evict_free_blocks(pool: Any) -> bool:
    """Allocate (evicting) and free every free block; True if that was every
    block but the null block, i.e. the prefix cache is now empty."""
    num_free = pool.get_num_free_blocks()
    pool.free_blocks(pool.get_new_blocks(num_free))
    return num_free == pool.num_gpu_blocks - 1


def evict_everything(driver: PoolDriver | ManagerDriver) -> bool:
    """Finish every request, then evict every cached block."""
    driver.free_all()
    return evict_free_blocks(driver.pool)


def pool_config(hash_block_size: int, block_size: int, num_blocks: int):
    return lambda rng: PoolDriver(rng, hash_block_size, block_size, num_blocks)


def manager_config(
    hash_block_size,
    groups,
    num_blocks,
    token_budget,
    retention_interval=None,
    max_prompt_blocks=3,
):
    return lambda rng: ManagerDriver(
        rng,
        hash_block_size,
        groups,
        num_blocks,
        token_budget,
        retention_interval,
        max_prompt_blocks,
    )


CONFIGS: dict[str, Callable[[random.Random], PoolDriver | ManagerDriver]] = {
    "pool-128x1536": pool_config(128, 1536, 12),
    "pool-2x6": pool_config(2, 6, 24),
    "pool-4x12": pool_config(4, 12, 24),
    "pool-16x64": pool_config(16, 64, 24),
    # Full attention in two block sizes; the group whose block is larger than
    # the hash block registers prompt tails as partial entries.
    "manager-full": manager_config(
        16, [("full_attention", 16), ("full_attention", 64)], 64, 96
    ),
    # Attention plus Mamba in align mode: fine-grained partial hits.
    "manager-mamba": manager_config(
        16, [("full_attention", 64), ("mamba", 64)], 64, 96
    ),
    # Full attention plus sliding window (a 128-token window in 64-token
    # blocks under a 256-token scheduler block): blocks no hit can use are
    # masked out of the cache and never announced.
    "manager-swa": manager_config(
        16, [("full_attention", 256), ("sliding_window", 64)], 96, 320
    ),
    # The skipped-block path (K4): prompts of up to six cache blocks, prefilled
    # in chunks of four. Under the engine's retention (0) only the Mamba
    # states at replay boundaries are cached, the others masked out; under
    # dense retention the states inside a chunk are still null blocks.
    "mamba-sparse": manager_config(
        16, [("full_attention", 64), ("mamba", 64)], 64, 256, 0, 6
    ),
    "mamba-dense-chunks": manager_config(
        16, [("full_attention", 64), ("mamba", 64)], 64, 256, None, 6
    ),
    # Sliding window under the engine's retention: only the window before
    # each replay boundary is cached.
    "swa-sparse": manager_config(
        16, [("full_attention", 256), ("sliding_window", 64)], 96, 320, 0
    ),
}


def in_full_report_mode(config: Callable[[random.Random], ManagerDriver]):
    """``config`` with every request asking, as a client can with
    ``extra_args={"kv_cache_report_mode": "full"}``, for its prefix-cache
    hits to be announced again (vLLM 0.26 on; earlier releases ignore it)."""

    def build(rng: random.Random) -> ManagerDriver:
        driver = config(rng)
        driver.prompts.report_mode = "full"
        return driver

    return build


# Report mode "full" (docs/contract.md, "Report mode full"): each config and
# the config of CONFIGS it repeats, same seeds, same operations. Not with
# Mamba: there released vLLM fails on a hit that ends inside a block.
FULL_REPORT_TWINS = {"full-report": "manager-full", "swa-full-report": "swa-sparse"}
FULL_REPORT_CONFIGS = {
    name: in_full_report_mode(CONFIGS[twin]) for name, twin in FULL_REPORT_TWINS.items()
}
# Every workload the `workloads` verb runs.
WORKLOADS = {**CONFIGS, **FULL_REPORT_CONFIGS}
