"""A seeded driver of vLLM's `KVCacheManager` under a small scheduler loop.

Hybrid group layouts (full attention in two block sizes, attention plus Mamba
in align mode, attention plus sliding window), so that the coordinator's own
call patterns occur.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.workloads.compat import (
    NO_EAGLE,
    computed_blocks,
    partial_hash_hits,
    release_block_copies,
    take_boundary_state_offloads,
)
from harness.workloads.requests import VOCAB, Prompts


@dataclass
class ManagerDriver:
    """Drives a KVCacheManager with a small scheduler loop, one step per op."""

    rng: random.Random
    hash_block_size: int
    groups: list[tuple[str, int]]  # (spec kind, block size) per group
    num_blocks: int
    token_budget: int
    # KVCacheConfig.prefix_cache_retention_interval: None (its own default)
    # caches every Mamba or sliding-window block a hit could use; 0 (the
    # engine's, from CacheConfig) only those at replay boundaries, masking the
    # rest out of the cache.
    retention_interval: int | None = None
    # Prompts are up to this many scheduler blocks long.
    max_prompt_blocks: int = 3
    running: list = field(default_factory=list)

    def __post_init__(self):
        from math import lcm

        from vllm.v1.core.kv_cache_manager import KVCacheManager
        from vllm.v1.kv_cache_interface import KVCacheConfig, KVCacheGroupSpec

        config = KVCacheConfig(
            num_blocks=self.num_blocks,
            kv_cache_tensors=[],
            kv_cache_groups=[
                KVCacheGroupSpec([f"layer{index}"], self._spec(kind, block_size))
                for index, (kind, block_size) in enumerate(self.groups)
            ],
        )
        config.prefix_cache_retention_interval = self.retention_interval
        self.scheduler_block_size = lcm(*(size for _, size in self.groups))
        self.manager = KVCacheManager(
            config,
            max_model_len=1 << 16,
            scheduler_block_size=self.scheduler_block_size,
            hash_block_size=self.hash_block_size,
            enable_caching=True,
            enable_kv_cache_events=True,
        )
        self.pool = self.manager.block_pool
        self.group_kinds = [kind for kind, _ in self.groups]
        self.block_sizes = [size for _, size in self.groups]
        self.mamba_split = self._mamba_split() if "mamba" in self.group_kinds else None
        self.prompts = Prompts(
            self.rng,
            self.max_prompt_blocks * self.scheduler_block_size,
            self.hash_block_size,
        )

    @staticmethod
    def _spec(kind: str, block_size: int) -> Any:
        import torch
        from vllm.v1.kv_cache_interface import (
            FullAttentionSpec,
            MambaSpec,
            SlidingWindowSpec,
        )

        if kind == "full_attention":
            return FullAttentionSpec(
                block_size=block_size, num_kv_heads=1, head_size=1, dtype=torch.float32
            )
        if kind == "sliding_window":
            return SlidingWindowSpec(
                block_size=block_size,
                num_kv_heads=1,
                head_size=1,
                dtype=torch.float32,
                sliding_window=2 * block_size,
            )
        assert kind == "mamba"
        return MambaSpec(
            block_size=block_size,
            shapes=((1, 1),),
            dtypes=(torch.float32,),
            mamba_cache_mode="align",
        )

    def _mamba_split(self) -> Callable[[Any, int], int]:
        """The scheduler's chunk split for Mamba align mode, on a stand-in."""
        from types import SimpleNamespace

        from vllm.v1.core.sched.scheduler import Scheduler

        mamba_block_size = self.block_sizes[self.group_kinds.index("mamba")]
        stand_in = SimpleNamespace(
            block_size=self.scheduler_block_size,
            cache_config=SimpleNamespace(block_size=mamba_block_size),
            hash_block_size=self.hash_block_size,
            max_num_scheduled_tokens=self.token_budget,
            scheduler_config=SimpleNamespace(long_prefill_token_threshold=0),
            **NO_EAGLE,
            num_hash_lookahead_tokens=0,
            mamba_partial_cache_hit=partial_hash_hits(self.manager),
            # vLLM 0.30 reads the scheduler's fine-grained switch here too.
            mamba_fine_grained_prefix_cache=(
                partial_hash_hits(self.manager)
                and getattr(self.manager, "mamba_fine_grained_prefix_cache", False)
            ),
            mamba_shared_prefix_checkpoint=False,
            mamba_has_prefill_checkpoint_blocks=False,
            mamba_prefill_checkpoint_alignment=None,
        )
        return functools.partial(Scheduler._mamba_block_aligned_split, stand_in)

    # Operation -> weight; every step also runs the requests admitted before.
    OPS = {"admit": 40, "run": 40, "finish": 17, "reset": 3}

    def step(self) -> str:
        name = self.rng.choices(list(self.OPS), list(self.OPS.values()))[0]
        self.manager.new_step_starts()
        scheduled = list(self.running)
        if name == "admit":
            self._admit()
        elif name == "finish" and self.running:
            self.manager.free(self.running.pop(self.rng.randrange(len(self.running))))
        elif name == "reset":
            self.free_all()
            self.manager.reset_prefix_cache()
        self._schedule([request for request in scheduled if request in self.running])
        # The step runs: CoW copies are done, so their endpoints are released.
        release_block_copies(self.manager)
        self.manager.take_new_block_ids()
        take_boundary_state_offloads(self.manager)
        return name

    def _admit(self) -> None:
        request = self.prompts.next_request()
        length = request.num_tokens
        computed, num_computed = computed_blocks(self.manager, request)
        num_new = self._chunk(request, length - num_computed, num_computed)
        if num_new == 0:
            return
        if (
            self.manager.allocate_slots(request, num_new, num_computed, computed)
            is None
        ):
            return
        request.num_computed_tokens = num_computed + num_new
        self.running.append(request)
        self._sample_if_done(request)

    def _schedule(self, requests: list) -> None:
        """One step for requests admitted before it: a prefill chunk or a
        decode token each."""
        for request in requests:
            num_new = self._chunk(
                request, request.num_tokens - request.num_computed_tokens, 0
            )
            if num_new == 0:
                continue
            if self.manager.allocate_slots(request, num_new) is None:
                self.running.remove(request)  # preempted, not resumed
                self.manager.free(request)
                continue
            request.num_computed_tokens += num_new
            self._sample_if_done(request)

    def _chunk(self, request: Any, num_tokens: int, num_computed: int) -> int:
        num_tokens = min(num_tokens, self.token_budget)
        if self.mamba_split is None or num_tokens == 0:
            return num_tokens
        return self.mamba_split(request, num_tokens, num_computed)

    def _sample_if_done(self, request: Any) -> None:
        if request.num_computed_tokens == request.num_tokens:
            request.append_output_token_ids(self.rng.randrange(VOCAB))

    def free_all(self) -> None:
        while self.running:
            self.manager.free(self.running.pop())
