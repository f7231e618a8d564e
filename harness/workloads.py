"""Seeded workloads that drive a vLLM tree's own KV-cache code.

Run inside the interpreter of the tree under test::

    PYTHONPATH=<vllm tree>:<repo root> VLLM_TARGET_DEVICE=cpu \\
        python -m harness.workloads --config NAME --seed S --ops N --out FILE

Two kinds of driver:

- ``pool-HBSxBS``: `BlockPool` directly, as upstream's prefix-cache tests do
  (requests sharing prefixes, extensions, prompt-tail partial entries inside
  and past the first cache block, promotions, replacement, frees, eviction
  pressure, ``evict_blocks``, ``reset_prefix_cache``);
- ``manager-*``: `KVCacheManager` with hybrid group layouts under a small
  scheduler loop, so the coordinator's own call patterns occur.

Every event is attributed to the pool operation that produced it (the
public `BlockPool` methods are wrapped on the instance and label each call
from the block's state before it). The output file holds msgpack records back
to back: a `RunStart`, then per operation an `OpRecord` with each event as
vLLM's own encoder wrote it (what its ZMQ publisher sends), a
`PoolSnapshot` of the hashes the pool holds and a `BookkeepingSample` of the
series' ancestry bookkeeping; then an operation that evicts everything and a
`RunEnd`. ``--stream FILE`` also writes the events as
`KVEventBatch` payloads, one per operation, for ``check-stream``.

The record schema below imports no vLLM, so checkers can read the records.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from harness.stream import ExternalBlockHash, split_payloads

# --------------------------------------------------------------------------
# Record schema
# --------------------------------------------------------------------------


class EventRecord(msgspec.Struct, array_like=True, frozen=True):
    label: str  # what produced it, see EventLabeller
    data: bytes  # the event as vLLM's msgspec encoder wrote it


class RunStart(msgspec.Struct, tag="start"):
    config: str
    seed: int
    ops: int
    hash_block_size: int
    num_blocks: int  # in the pool
    block_sizes: list[int]  # per KV cache group
    group_kinds: list[str]  # per KV cache group, KVCacheSpecKind values
    medium: str
    none_hash: bytes  # vLLM's NONE_HASH for this run, for C4
    int_block_hashes: bool  # events carry 64-bit ints instead of bytes
    tree: str  # where vllm was imported from


class OpRecord(msgspec.Struct, tag="op"):
    index: int
    name: str
    events: list[EventRecord]


class PoolSnapshot(msgspec.Struct, tag="snapshot"):
    op: int
    held: dict[int, list[ExternalBlockHash]]  # group -> hashes the pool holds


class BookkeepingSample(msgspec.Struct, tag="bookkeeping"):
    op: int
    # Size of each ancestry-bookkeeping structure of the pool, None on a
    # tree that has none (see BOOKKEEPING_ATTRIBUTES).
    sizes: dict[str, int] | None


class RunEnd(msgspec.Struct, tag="end"):
    drained: bool  # everything was evicted by the last operation


Record = RunStart | OpRecord | PoolSnapshot | BookkeepingSample | RunEnd
_record_encoder = msgspec.msgpack.Encoder()
_record_decoder = msgspec.msgpack.Decoder(Record)


def read_records(path: Path) -> list[Record]:
    data = path.read_bytes()
    return [_record_decoder.decode(payload) for _, payload in split_payloads(data)]


# The series' per-pool bookkeeping of reported ancestry boundaries. Absent on
# a pristine tree.
BOOKKEEPING_ATTRIBUTES = ("_ancestry_by_block", "_ancestry_ref_cnt")


def bookkeeping_sizes(pool: Any) -> dict[str, int] | None:
    """Entries in each bookkeeping structure; nested dicts count their leaves."""
    sizes = {}
    for name in BOOKKEEPING_ATTRIBUTES:
        value = getattr(pool, name, None)
        if value is not None:
            sizes[name] = sum(
                len(inner) if isinstance(inner, dict) else 1 for inner in value.values()
            )
    return sizes or None


# --------------------------------------------------------------------------
# Event attribution
# --------------------------------------------------------------------------

# Labels (prefix before "@"; the suffix is the group's KVCacheSpecKind):
#   partial:first             first registration of a partial entry
#   partial:first-block       ... inside the request's first cache block
#   partial:replace           replace_existing_hashes=True
#   partial:replace-first-block
#   partial:promotion         the block's partial entry moves to a later boundary
#   partial:cached            already registered there (emits nothing)
#   full                      cache_full_blocks
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
        for name in self.METHODS:
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
            first_block = num_tokens < arguments["block_size"]
            if arguments["replace_existing_hashes"]:
                kind = "replace-first-block" if first_block else "replace"
            elif self._holds(block, arguments["request"], num_tokens, group):
                kind = "cached"
            elif (
                block.block_hash is not None
                and block.block_hash_num_tokens is not None
                and block.block_hash_num_tokens < num_tokens
            ):
                kind = "promotion"
            else:
                kind = "first-block" if first_block else "first"
            return f"partial:{kind}@{self.group_kinds[group]}"
        if name == "cache_full_blocks":
            return f"full@{self.group_kinds[arguments['kv_cache_group_id']]}"
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

    def take(self, events: list) -> list[tuple[str, Any]]:
        labelled = [
            (self.labels.get(id(event), "unattributed"), event) for event in events
        ]
        self.labels.clear()
        return labelled


# --------------------------------------------------------------------------
# Drivers
# --------------------------------------------------------------------------

VOCAB = 8  # small, so random suffixes still share prefixes now and then


def make_request(request_id: str, token_ids: list[int], hash_block_size: int) -> Any:
    """A request as upstream's prefix-cache tests build it (sha256 hashing)."""
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher
    from vllm.v1.request import Request

    sampling_params = SamplingParams(max_tokens=1 << 20)
    sampling_params.update_from_generation_config({}, eos_token_id=VOCAB + 1)
    return Request(
        request_id=request_id,
        prompt_token_ids=token_ids,
        mm_features=None,
        sampling_params=sampling_params,
        pooling_params=None,
        block_hasher=get_request_block_hasher(hash_block_size, sha256),
    )


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class Prompts:
    """Seeded prompts that start from a few shared documents, so requests
    share prefixes of any length."""

    def __init__(self, rng: random.Random, max_length: int, hash_block_size: int):
        self.rng = rng
        self.max_length = max_length
        self.hash_block_size = hash_block_size
        self.documents = [
            [rng.randrange(VOCAB) for _ in range(max_length)] for _ in range(3)
        ]
        self.issued = 0

    def next_request(self) -> Any:
        length = self.rng.randint(1, self.max_length)
        shared = self.rng.randint(0, length)
        document = self.rng.choice(self.documents)
        tokens = document[:shared] + [
            self.rng.randrange(VOCAB) for _ in range(length - shared)
        ]
        self.issued += 1
        return make_request(str(self.issued), tokens, self.hash_block_size)


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

    def op_replace(self) -> None:
        """Re-key a request's tail block in place (a Mamba checkpoint does)."""
        if not self.running:
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
        from vllm.v1.core.kv_cache_utils import resolve_block_hashes

        block_hashes = resolve_block_hashes(
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


@dataclass
class ManagerDriver:
    """Drives a KVCacheManager with a small scheduler loop, one step per op."""

    rng: random.Random
    hash_block_size: int
    groups: list[tuple[str, int]]  # (spec kind, block size) per group
    num_blocks: int
    token_budget: int
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
            self.rng, 3 * self.scheduler_block_size, self.hash_block_size
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
            use_eagle_block_drop=False,
            num_hash_lookahead_tokens=0,
            mamba_partial_cache_hit=self.manager.coordinator.enable_partial_hash_hits,
            # vLLM 0.30 reads the scheduler's fine-grained switch here too.
            mamba_fine_grained_prefix_cache=(
                self.manager.coordinator.enable_partial_hash_hits
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
        _, retained = self.manager.take_kv_cache_block_copies()
        self.pool.free_blocks(retained)
        self.manager.take_new_block_ids()
        self.manager.take_boundary_state_offloads()
        return name

    def _admit(self) -> None:
        request = self.prompts.next_request()
        length = request.num_tokens
        computed, num_computed, _ = self.manager.get_computed_blocks(request)
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


def manager_config(hash_block_size, groups, num_blocks, token_budget):
    return lambda rng: ManagerDriver(
        rng, hash_block_size, groups, num_blocks, token_budget
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
}


# --------------------------------------------------------------------------
# Running a workload
# --------------------------------------------------------------------------


def held_hashes(pool: Any) -> dict[int, list[ExternalBlockHash]]:
    from vllm.v1.core.kv_cache_utils import (
        get_block_hash,
        get_group_id,
        maybe_convert_block_hash,
    )

    held: dict[int, list[ExternalBlockHash]] = {}
    for key in pool.cached_block_hash_to_block._cache:
        held.setdefault(get_group_id(key), []).append(
            maybe_convert_block_hash(get_block_hash(key))
        )
    return held


class Recorder:
    """Takes each operation's events from the pool and writes the records."""

    def __init__(self, driver, labeller: EventLabeller, out, stream):
        self.driver = driver
        self.labeller = labeller
        self.out = out
        self.stream = stream
        self.encoder = msgspec.msgpack.Encoder()

    def write(self, record: Record) -> None:
        self.out.write(_record_encoder.encode(record))

    def op(self, index: int, name: str) -> None:
        from vllm.distributed.kv_events import KVEventBatch

        take = getattr(self.driver, "manager", self.driver.pool).take_events
        events = self.labeller.take(take())
        self.write(
            OpRecord(
                index,
                name,
                [
                    EventRecord(label, self.encoder.encode(event))
                    for label, event in events
                ],
            )
        )
        self.write(PoolSnapshot(index, held_hashes(self.driver.pool)))
        self.write(BookkeepingSample(index, bookkeeping_sizes(self.driver.pool)))
        if self.stream is not None and events:
            batch = KVEventBatch(ts=float(index), events=[event for _, event in events])
            self.stream.write(self.encoder.encode(batch))


def build(config: str, seed: int):
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import init_none_hash

    init_none_hash(sha256)
    driver = CONFIGS[config](random.Random(seed))
    return driver, EventLabeller(driver.pool, driver.group_kinds)


def run_start(config: str, seed: int, ops: int, driver) -> RunStart:
    import vllm
    import vllm.envs as envs
    from vllm.v1.core import kv_cache_utils

    return RunStart(
        config=config,
        seed=seed,
        ops=ops,
        hash_block_size=driver.pool.hash_block_size,
        num_blocks=driver.pool.num_gpu_blocks,
        block_sizes=driver.block_sizes,
        group_kinds=driver.group_kinds,
        medium=driver.pool.medium,
        none_hash=kv_cache_utils.NONE_HASH,
        int_block_hashes=envs.VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES,
        tree=os.path.dirname(os.path.dirname(vllm.__file__)),
    )


def run_workload(
    config: str, seed: int, ops: int, out: Path, stream: Path | None = None
) -> None:
    driver, labeller = build(config, seed)
    with (
        out.open("wb") as sink,
        (
            stream.open("wb") if stream is not None else open(os.devnull, "wb")
        ) as stream_sink,
    ):
        recorder = Recorder(driver, labeller, sink, stream_sink)
        recorder.write(run_start(config, seed, ops, driver))
        for index in range(ops):
            recorder.op(index, driver.step())
        drained = evict_everything(driver)
        recorder.op(ops, "evict-everything")
        recorder.write(RunEnd(drained))


def run_seed_example(out: Path, stream: Path | None = None) -> None:
    """The seed report's case: hbs 128, block 1536, an 1800-token prompt."""
    driver, labeller = build("pool-128x1536", 0)
    pool = driver.pool
    request = make_request("seed", list(range(1800)), 128)
    with (
        out.open("wb") as sink,
        (
            stream.open("wb") if stream is not None else open(os.devnull, "wb")
        ) as stream_sink,
    ):
        recorder = Recorder(driver, labeller, sink, stream_sink)
        recorder.write(run_start("seed-1800", 0, 2, driver))
        blocks = pool.get_new_blocks(2)
        pool.cache_full_blocks(request, blocks, 0, 1, 1536, 0)
        pool.cache_partial_block(request, blocks[1], 1792, 0, 1536)
        recorder.op(0, "cache-1800-token-prompt")
        pool.free_blocks(blocks[::-1])
        drained = evict_free_blocks(pool)
        recorder.op(1, "evict-everything")
        recorder.write(RunEnd(drained))


def soak(config: str, seed: int, ops: int, sample_every: int) -> dict[str, Any]:
    """Run many operations, sampling the series' bookkeeping and replaying
    the stream through the checker; writes no records."""
    from vllm.distributed.kv_events import KVEventBatch

    from harness.stream import StreamChecker, decode_batches

    driver, labeller = build(config, seed)
    take = getattr(driver, "manager", driver.pool).take_events
    encoder = msgspec.msgpack.Encoder()
    checker = StreamChecker()

    def replay_events() -> None:
        events = [event for _, event in labeller.take(take())]
        payload = encoder.encode(KVEventBatch(ts=0.0, events=events))
        for _, batch in decode_batches(payload):
            checker.apply(batch.events)

    samples = []
    started = time.monotonic()
    for index in range(ops):
        driver.step()
        replay_events()
        if index % sample_every == 0:
            samples.append(bookkeeping_sizes(driver.pool))
    drained = evict_everything(driver)
    replay_events()
    if drained:
        checker.check_drained()
    final = bookkeeping_sizes(driver.pool)
    halves = samples[: len(samples) // 2], samples[len(samples) // 2 :]
    return {
        "config": config,
        "ops": ops,
        "seconds": round(time.monotonic() - started, 1),
        "blocks": driver.pool.num_gpu_blocks,
        "events": checker.events,
        "violations": dict(Counter(v.rule for v in checker.violations)),
        "bookkeeping": None
        if final is None
        else {
            name: {
                "peak_first_half": max(sample[name] for sample in halves[0]),
                "peak_second_half": max(sample[name] for sample in halves[1]),
                "after_evicting_everything": final[name],
            }
            for name in final
        },
    }


def serve() -> int:
    """Run workloads on request, one JSON object per line on stdin.

    Saves the tree's import time for callers running many workloads. vLLM
    logs to stdout, so replies go to a private copy of it and stdout is
    pointed at stderr.
    """
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["config"] == "seed-1800":
                run_seed_example(Path(request["out"]))
            else:
                run_workload(
                    request["config"],
                    request["seed"],
                    request["ops"],
                    Path(request["out"]),
                )
            reply = {"ok": True}
        except Exception as exc:  # reported to the caller, who fails the test
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.workloads")
    parser.add_argument("--config", choices=[*CONFIGS, "seed-1800"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--out", type=Path, help="record file")
    parser.add_argument("--stream", type=Path, help="also write KVEventBatch payloads")
    parser.add_argument(
        "--soak",
        action="store_true",
        help="run --ops operations per config (all pool/manager configs unless "
        "--config), sampling the series' bookkeeping size; prints JSON lines",
    )
    parser.add_argument("--sample-every", type=int, default=1000)
    parser.add_argument(
        "--serve", action="store_true", help=serve.__doc__.split("\n")[0]
    )
    args = parser.parse_args(argv)
    if args.serve:
        return serve()
    if args.soak:
        for config in [args.config] if args.config else CONFIGS:
            print(json.dumps(soak(config, args.seed, args.ops, args.sample_every)))
            sys.stdout.flush()
        return 0
    if args.config is None or args.out is None:
        parser.error("--config and --out are required")
    if args.config == "seed-1800":
        run_seed_example(args.out, args.stream)
    else:
        run_workload(args.config, args.seed, args.ops, args.out, args.stream)
    return 0


if __name__ == "__main__":
    sys.exit(main())
