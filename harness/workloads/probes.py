"""Probe requests looked up in a workload's cache, for the router-fidelity
measure (harness.routers.fidelity).

At each quiet point (after an operation) a few requests are drawn from the
prompts issued so far: the prompt itself, a truncation of it, or the prompt
continued with fresh tokens. Each is looked up with the engine's own code and
nothing is scheduled: the coordinator's ``find_longest_cache_hit`` and
``find_longest_cache_hit_per_group`` for the `KVCacheManager` workloads,
``FullAttentionManager.find_longest_cache_hit`` over the pool for the
`BlockPool` ones, both capped at ``num_tokens - 1`` as the scheduler caps
them. These lookups only read the pool's hash map (``get_cached_block``): no
block is touched, no event queued, no statistic counted; the conformance
suite checks that a run's stream is the same with probes on. The probes draw
from their own seeded generator, never the driver's, so the workload runs
the same operations with or without them.
"""

from __future__ import annotations

import random
from typing import Any

from harness.contract.records import Probe, ProbeRecord, ProbeSetup
from harness.workloads.compat import (
    full_attention_hit,
    full_attention_looks_up_hash_blocks,
)
from harness.workloads.requests import VOCAB, make_request

# Fresh tokens a continuation adds, at most (in hash blocks).
CONTINUATION_BLOCKS = 4


def probe_seed(seed: int) -> str:
    # A string seed: independent of the workload's integer seed stream.
    return f"probes:{seed}"


class Prober:
    """Draws and looks up the probes of one workload run."""

    def __init__(self, driver: Any, seed: int, per_op: int):
        self.driver = driver
        self.seed = seed
        self.per_op = per_op
        self.rng = random.Random(probe_seed(seed))
        self.issued: list[list[int]] = []
        driver.prompts.on_issue = self.issued.append
        self.hash_block_size = driver.pool.hash_block_size
        manager = getattr(driver, "manager", None)
        self.coordinator = manager.coordinator if manager is not None else None

    def setup(self) -> ProbeSetup:
        if self.coordinator is None:
            # One full-attention group driven through its pool: partial hash
            # hits at the hash block, as in a hybrid model's attention group,
            # where the manager looks hash blocks up (0.26 on); whole blocks
            # before.
            alignment = (
                self.hash_block_size
                if full_attention_looks_up_hash_blocks()
                else self.driver.block_size
            )
            windows = [None]
        else:
            alignment = getattr(
                self.coordinator,
                "_cache_hit_alignment_tokens",
                self.driver.scheduler_block_size,
            )
            windows = [
                getattr(group.kv_cache_spec, "sliding_window", None)
                for group in self.coordinator.kv_cache_config.kv_cache_groups
            ]
        return ProbeSetup(self.per_op, self.seed, alignment, windows)

    def draw(self) -> list[tuple[str, list[int]]]:
        """(origin, token ids) of this quiet point's probes."""
        if not self.issued:
            return []
        drawn = []
        for _ in range(self.per_op):
            tokens = self.rng.choice(self.issued)
            roll = self.rng.random()
            if roll < 0.4 or len(tokens) < 2:
                drawn.append(("prompt", list(tokens)))
            elif roll < 0.7:
                end = self.rng.randint(1, len(tokens) - 1)
                drawn.append(("truncation", tokens[:end]))
            else:
                extra = self.rng.randint(1, CONTINUATION_BLOCKS * self.hash_block_size)
                fresh = [self.rng.randrange(VOCAB) for _ in range(extra)]
                drawn.append(("continuation", tokens + fresh))
        return drawn

    def look_up(self, origin: str, tokens: list[int]) -> Probe:
        from vllm.v1.core.kv_cache_utils import maybe_convert_block_hash

        request = make_request("probe", tokens, self.hash_block_size)
        cap = len(tokens) - 1
        if self.coordinator is not None:
            _, hit, *_ = self.coordinator.find_longest_cache_hit(
                request.block_hashes, cap
            )
            per_group = [hit]  # one group: the coordinator's is its own
            if hasattr(self.coordinator, "find_longest_cache_hit_per_group"):
                _, per_group = self.coordinator.find_longest_cache_hit_per_group(
                    request.block_hashes, cap
                )
        else:
            hit = self._pool_hit(request.block_hashes, cap)
            per_group = [hit]
        return Probe(
            origin=origin,
            token_ids=tokens,
            block_hashes=[maybe_convert_block_hash(h) for h in request.block_hashes],
            hit=hit,
            hit_per_group=list(per_group),
        )

    def _pool_hit(self, block_hashes: list, cap: int) -> int:
        import torch
        from vllm.v1.core.single_type_kv_cache_manager import FullAttentionManager
        from vllm.v1.kv_cache_interface import FullAttentionSpec

        spec = FullAttentionSpec(
            block_size=self.driver.block_size,
            num_kv_heads=1,
            head_size=1,
            dtype=torch.float32,
        )
        return full_attention_hit(
            FullAttentionManager,
            block_hashes,
            self.driver.pool,
            self.driver.block_size,
            max_length=cap,
            kv_cache_group_ids=[0],
            kv_cache_spec=spec,
            drop_eagle_block=False,
            alignment_tokens=self.hash_block_size,
        )

    def record(self, op: int) -> ProbeRecord:
        return ProbeRecord(op, [self.look_up(*drawn) for drawn in self.draw()])
