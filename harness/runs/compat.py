"""What the workload drivers bridge between vLLM releases, in one place.

The drivers are written against the newest release; each function here
answers one question the same way on the older trees the backports target
(0.24 to 0.29). What each bridges, by the first release that no longer needs
it:

- 0.26: `BlockPool.emit_cached_block_events`,
  `kv_cache_utils.resolve_block_hashes`,
  `KVCacheManager.take_kv_cache_block_copies`, the coordinator's
  `enable_partial_hash_hits`, and `get_computed_blocks` returning a third
  value (the shared-prefix boundary);
- 0.29: `KVCacheManager.take_boundary_state_offloads`;
- 0.30: `BlockPool.medium`, `cache_partial_block(replace_existing_hashes=)`,
  and the scheduler's `use_eagle_block_drop` (read as `use_eagle` before).

Every answer is read from the tree under test (an attribute or a parameter
it has or lacks), never from a version number, so that a tree between
releases is bridged by what it holds. vLLM is imported only inside the
functions: they run inside the tree under test.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

REPLACE_PARAMETER = "replace_existing_hashes"


def pool_medium(pool: Any) -> str:
    """The medium the pool's events carry (before 0.30 always the GPU's)."""
    if hasattr(pool, "medium"):
        return pool.medium
    from vllm.distributed.kv_events import MEDIUM_GPU

    return MEDIUM_GPU


def can_replace_existing_hashes(pool: Any) -> bool:
    """Whether `cache_partial_block` can re-key a block in place (0.30 on)."""
    parameters = inspect.signature(pool.cache_partial_block).parameters
    return REPLACE_PARAMETER in parameters


def replacement(pool: Any, replace: bool) -> dict[str, bool]:
    """The keyword arguments of a `cache_partial_block` call that re-keys a
    block holding an earlier entry of the same request to a later boundary.

    Before 0.30 there is no in-place replacement; that call is the release's
    promotion, which removes the block's hashes first as a replacement does,
    so the same call is made without the flag."""
    if replace and can_replace_existing_hashes(pool):
        return {REPLACE_PARAMETER: True}
    return {}


def is_replacement(arguments: dict[str, Any]) -> bool:
    """Whether bound `cache_partial_block` arguments ask for a replacement
    (never before 0.30, whose signature has no such parameter)."""
    return bool(arguments.get(REPLACE_PARAMETER, False))


def pool_methods(pool: Any, names: Iterable[str]) -> list[str]:
    """The methods among ``names`` that the pool has
    (`emit_cached_block_events` only from 0.26 on)."""
    return [name for name in names if hasattr(pool, name)]


def block_hashes_at(block_hashes: Any, hash_block_size: int, block_size: int) -> Any:
    """A request's block hashes viewed at ``block_size``, as the pool sees them."""
    from vllm.v1.core import kv_cache_utils

    if hasattr(kv_cache_utils, "resolve_block_hashes"):
        return kv_cache_utils.resolve_block_hashes(
            block_hashes, hash_block_size, block_size
        )
    if block_size == hash_block_size:
        return block_hashes
    return kv_cache_utils.BlockHashListWithBlockSize(
        block_hashes, hash_block_size, block_size
    )


def partial_hash_hits(manager: Any) -> bool:
    """Whether the manager's coordinator serves hash-block-aligned hits."""
    return getattr(manager.coordinator, "enable_partial_hash_hits", False)


# The scheduler's switch for dropping the last block under EAGLE, under both
# of its names, for a stand-in scheduler.
NO_EAGLE = {"use_eagle_block_drop": False, "use_eagle": False}


def computed_blocks(manager: Any, request: Any) -> tuple[Any, int]:
    """The request's prefix-cache hit: (blocks, number of computed tokens)."""
    blocks, num_computed = manager.get_computed_blocks(request)[:2]
    return blocks, num_computed


def end_step(manager: Any) -> None:
    """What the scheduler does with the manager once a step has run: release
    the endpoints of finished copy-on-write copies, take the new block ids
    and the boundary-state offloads."""
    if hasattr(manager, "take_kv_cache_block_copies"):
        _, retained = manager.take_kv_cache_block_copies()
        manager.block_pool.free_blocks(retained)
    manager.take_new_block_ids()
    if hasattr(manager, "take_boundary_state_offloads"):
        manager.take_boundary_state_offloads()
