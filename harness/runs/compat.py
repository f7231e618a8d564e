"""What the workload drivers bridge between vLLM releases, in one place.

The drivers are written against the newest release; each function here
answers one question the same way on the older trees the backports target
(0.26 to 0.29). What each bridges, by the first release that no longer needs
it:

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
