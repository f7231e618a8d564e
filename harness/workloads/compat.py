"""What the workload drivers bridge between vLLM releases, in one place.

The drivers are written against the newest release; each function here
answers one question the same way on the older trees the backports target
(0.24 to 0.29). What each bridges, by the first release that no longer needs
it:

- 0.26: `BlockPool.emit_cached_block_events` and `move_block_hashes`,
  `kv_cache_utils.resolve_block_hashes`, a single-type manager's lookup of
  hash-block hashes (partial entries included) returning its hit length,
  managers that register partial entries themselves,
  `KVCacheManager.take_kv_cache_block_copies`, the coordinator's
  `enable_partial_hash_hits`, and `get_computed_blocks` returning a third
  value (the shared-prefix boundary);
- 0.29: `KVCacheManager.take_boundary_state_offloads`;
- 0.29: `Request(session_id=)`;
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

# The scheduler's switch for dropping the last block under EAGLE, under both
# of its names, for a stand-in scheduler.
NO_EAGLE = {"use_eagle_block_drop": False, "use_eagle": False}


def session(request_class: Any, session_id: str) -> dict[str, str]:
    """The keyword arguments that give a `Request` a session (0.29 on;
    nothing before, whose requests have none)."""
    if "session_id" in inspect.signature(request_class).parameters:
        return {"session_id": session_id}
    return {}


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


def take_boundary_state_offloads(manager: Any) -> None:
    """What the scheduler takes from the manager once a step has run, last:
    the boundary-state offloads (0.29 on; nothing to take before)."""
    if hasattr(manager, "take_boundary_state_offloads"):
        manager.take_boundary_state_offloads()


def pool_methods(pool: Any, names: Iterable[str]) -> list[str]:
    """The methods among ``names`` that the pool has
    (`emit_cached_block_events` only from 0.26 on)."""
    return [name for name in names if hasattr(pool, name)]


def can_move_block_hashes(pool: Any) -> bool:
    """Whether the pool can move a block's hashes to another block (0.26 on)."""
    return hasattr(pool, "move_block_hashes")


def block_hashes_at(block_hashes: Any, hash_block_size: int, block_size: int) -> Any:
    """A request's block hashes viewed at ``block_size``, as the pool sees them
    (`resolve_block_hashes` from 0.26 on; the list itself, or a
    `BlockHashListWithBlockSize` view of it, before)."""
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


def fine_grained_hash_lookup(manager_cls: Any) -> bool:
    """Whether a single-type manager looks a request's hash-block hashes up,
    partial entries included (0.26 on); before, it looks up whole blocks at
    its own block size."""
    return getattr(manager_cls, "supports_fine_grained_hash_lookup", False)


def full_attention_looks_up_hash_blocks() -> bool:
    """Whether the tree's `FullAttentionManager` looks hash-block hashes up
    (0.26 on); before, it serves whole blocks."""
    from vllm.v1.core.single_type_kv_cache_manager import FullAttentionManager

    return fine_grained_hash_lookup(FullAttentionManager)


def managers_register_partial_entries() -> bool:
    """Whether the tree's KV cache managers register partial prefix-cache
    entries (`BlockPool.cache_partial_block`) themselves. They came in 0.26
    with the fine-grained lookup that serves them; before, the pool has the
    method but only a program that drives the pool calls it."""
    return full_attention_looks_up_hash_blocks()


def full_attention_hit(
    manager_cls: Any, block_hashes: Any, pool: Any, block_size: int, **arguments: Any
) -> int:
    """The tokens `manager_cls.find_longest_cache_hit` finds cached for a
    request's hash-block hashes in ``pool`` (``arguments``: the rest of its
    parameters). From 0.26 the manager looks the hash-block hashes up itself,
    partial entries included, and returns the hit's length; before, it takes
    the hashes at its block size and returns the blocks alone: whole blocks."""
    if fine_grained_hash_lookup(manager_cls):
        _, hit = manager_cls.find_longest_cache_hit(
            block_hashes=block_hashes, block_pool=pool, **arguments
        )
        return hit
    blocks = manager_cls.find_longest_cache_hit(
        block_hashes=block_hashes_at(block_hashes, pool.hash_block_size, block_size),
        block_pool=pool,
        **arguments,
    )
    return len(blocks[0]) * block_size


def partial_hash_hits(manager: Any) -> bool:
    """Whether the manager's coordinator serves hash-block-aligned hits
    (never before 0.26, whose coordinators have no such switch)."""
    return getattr(manager.coordinator, "enable_partial_hash_hits", False)


def computed_blocks(manager: Any, request: Any) -> tuple[Any, int]:
    """The request's prefix-cache hit: (blocks, number of computed tokens);
    from 0.26 `get_computed_blocks` also returns the shared-prefix boundary."""
    blocks, num_computed = manager.get_computed_blocks(request)[:2]
    return blocks, num_computed


def release_block_copies(manager: Any) -> None:
    """Once a step has run, release the endpoints of finished copy-on-write
    copies (0.26 on; no copies before)."""
    if hasattr(manager, "take_kv_cache_block_copies"):
        _, retained = manager.take_kv_cache_block_copies()
        manager.block_pool.free_blocks(retained)
