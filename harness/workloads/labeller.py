"""Which pool operation produced each KV event.

The public `BlockPool` methods are wrapped on the instance, and each call is
labelled from the block's state before it, so every event of a workload is
attributed to the operation that emitted it (harness.contract.classes sorts
violations into classes by these labels).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from harness.workloads.compat import is_replacement, pool_methods

# Labels (prefix before "@"; the suffix is the group's KVCacheSpecKind):
#   partial:first             first registration of a partial entry
#   partial:first-block       ... inside the request's first cache block
#   partial:replace           replace_existing_hashes=True
#   partial:replace-first-block
#   partial:promotion         the block's partial entry moves to a later boundary
#   partial:KIND-unheld-start ... whose cache block starts at a hash the pool
#                             does not hold (evicted, null or masked)
#   partial:KIND-block-end    ... an entry that ends its cache block
#   partial:KIND-shared       ... (first or replace) where another KV cache
#                             group holds a boundary between the cache block's
#                             start and the entry
#   partial:cached            already registered there (emits nothing)
#   full                      cache_full_blocks
#   full-unheld-parent        ... whose parent block the pool no longer holds
#                             (evicted while in use)
#   hits                      emit_cached_block_events
#   evict:allocate            get_new_blocks evicting cached blocks
#   evict:connector           evict_blocks
#   evict:checkpoint          a manager evicting one block directly
#   reset                     reset_prefix_cache
#   free                      free_blocks (never emits on its own)
#   unattributed              emitted outside any wrapped call


class EventLabeller:
    """Wraps a pool's event-producing methods to label what each call emits."""

    METHODS = (
        "cache_partial_block",
        "cache_full_blocks",
        "emit_cached_block_events",
        "get_new_blocks",
        "evict_blocks",
        "_maybe_evict_cached_block",
        "reset_prefix_cache",
        "free_blocks",
    )

    def __init__(self, pool: Any, group_kinds: list[str]):
        self.pool = pool
        self.group_kinds = group_kinds
        self.labels: dict[int, str] = {}
        self.depth = 0
        for name in pool_methods(pool, self.METHODS):
            setattr(pool, name, self._wrap(name, getattr(pool, name)))

    def _wrap(self, name: str, method: Callable) -> Callable:
        signature = inspect.signature(method)

        @functools.wraps(method)
        def labelled(*args, **kwargs):
            if self.depth:
                return method(*args, **kwargs)
            call = signature.bind(*args, **kwargs)
            call.apply_defaults()
            label = self._label(name, call.arguments)
            queue = self.pool.kv_event_queue
            start = len(queue)
            self.depth += 1
            try:
                return method(*args, **kwargs)
            finally:
                self.depth -= 1
                for event in queue[start:]:
                    self.labels[id(event)] = label

        return labelled

    def _label(self, name: str, arguments: dict[str, Any]) -> str:
        if name == "cache_partial_block":
            block = arguments["block"]
            num_tokens = arguments["num_tokens"]
            group = arguments["kv_cache_group_id"]
            request = arguments["request"]
            if is_replacement(arguments):
                kind = "replace"
            elif self._holds(block, request, num_tokens, group):
                return f"partial:cached@{self.group_kinds[group]}"
            elif (
                block.block_hash is not None
                and block.block_hash_num_tokens is not None
                and block.block_hash_num_tokens < num_tokens
            ):
                kind = "promotion"
            else:
                kind = "first"
            position = self._chain_start(
                request, num_tokens, arguments["block_size"], group
            )
            if position == "-first-block" and kind == "first":
                kind, position = "first-block", ""
            elif not position and kind != "promotion":
                block_size = arguments["block_size"]
                if self._other_group_holds_a_boundary(
                    request, num_tokens, block_size, group
                ):
                    position = "-shared"
            return f"partial:{kind}{position}@{self.group_kinds[group]}"
        if name == "cache_full_blocks":
            group = arguments["kv_cache_group_id"]
            start = arguments["num_cached_blocks"] * arguments["block_size"]
            unheld = start and not self._pool_holds(arguments["request"], start, group)
            kind = "full-unheld-parent" if unheld else "full"
            return f"{kind}@{self.group_kinds[group]}"
        if name == "emit_cached_block_events":
            return f"hits@{self.group_kinds[arguments['kv_cache_group_id']]}"
        return {
            "get_new_blocks": "evict:allocate",
            "evict_blocks": "evict:connector",
            "_maybe_evict_cached_block": "evict:checkpoint",
            "reset_prefix_cache": "reset",
            "free_blocks": "free",
        }[name]

    def _holds(self, block: Any, request: Any, num_tokens: int, group: int) -> bool:
        from vllm.v1.core.kv_cache_utils import make_block_hash_with_group_id

        if block.is_null:
            return True
        key = make_block_hash_with_group_id(
            request.block_hashes[num_tokens // self.pool.hash_block_size - 1], group
        )
        return block.block_hash == key or self.pool.cached_block_hash_to_block.contain(
            key, block.block_id
        )

    def _chain_start(
        self, request: Any, num_tokens: int, block_size: int, group: int
    ) -> str:
        """Where the entry's ancestry would start, as the pool sees it before
        the call: "-unheld-start" when the pool does not hold the hash at its
        cache block's start (past the first block), "-block-end" for an entry
        that ends its cache block, "-first-block" inside the first cache
        block, else ""."""
        start = (num_tokens - 1) // block_size * block_size
        if start and not self._pool_holds(request, start, group):
            return "-unheld-start"
        if num_tokens % block_size == 0:
            return "-block-end"
        if start == 0:
            return "-first-block"
        return ""

    def _other_group_holds_a_boundary(
        self, request: Any, num_tokens: int, block_size: int, group: int
    ) -> bool:
        """Whether another group holds one of the hashes between the entry's
        cache block start and the entry (the groups share external hashes)."""
        hash_block_size = self.pool.hash_block_size
        start = (num_tokens - 1) // block_size * block_size
        return any(
            self._pool_holds(request, end, other)
            for other in range(len(self.group_kinds))
            if other != group
            for end in range(start + hash_block_size, num_tokens, hash_block_size)
        )

    def _pool_holds(self, request: Any, end: int, group: int) -> bool:
        """Whether the pool holds, in ``group``, the request's hash of its
        first ``end`` tokens."""
        from vllm.v1.core.kv_cache_utils import make_block_hash_with_group_id

        key = make_block_hash_with_group_id(
            request.block_hashes[end // self.pool.hash_block_size - 1], group
        )
        return self.pool.cached_block_hash_to_block.get_one_block(key) is not None

    def take(self, events: list) -> list[tuple[str, Any]]:
        labelled = [
            (self.labels.get(id(event), "unattributed"), event) for event in events
        ]
        self.labels.clear()
        return labelled
