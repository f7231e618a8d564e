"""A seeded fuzzer for the series: every class of violation on a patched
tree's KV-event stream must be at most the pristine tree's, operation by
operation, and a set-based consumer must never miss more of the hashes the
pool holds than it does on the pristine stream.

    python tests/tools/series_fuzz.py [--tree LABEL=PATH ...] [--config NAME ...]
        [--seeds 50] [--first-seed 0] [--ops 300] [--jobs 2] [--json FILE]
        [--show 5]

The first ``--tree`` is the baseline (default: the harness's cached trees of
target main: pristine, default and strict). Each tree runs in a child process
of its own, ``PYTHONPATH=<tree>:<repo> VLLM_TARGET_DEVICE=cpu
PYTHONHASHSEED=0``, which drives the tree's own ``BlockPool`` with seeded
operations and replays each operation's events as it goes. The operations
make the same pool calls in every tree (the series changes no lookup and no
allocation; the digest of the calls is compared): requests sharing prefixes
in one or two KV cache groups (one may hold null and masked blocks, as
sliding window and Mamba align mode do), with LoRA, multimodal inputs and
lookahead tokens (vLLM 0.33 on) in some configs; prompt tails and entries at random
boundaries, so the pool holds boundaries that other entries lead through;
copies of one entry in several blocks; decoding that promotes a tail by one
or by several hash blocks, or to a full block; ``replace_existing_hashes``;
``move_block_hashes``; ``evict_blocks`` of blocks in use and of cached ones,
a direct ``_maybe_evict_cached_block`` as the Mamba manager does, eviction by
allocation, ``emit_cached_block_events`` and ``reset_prefix_cache``; then
everything is evicted.

Each violation the project's stream checker finds (rules C1-C6 of
docs/contract.md) is counted under ``RULE:LABEL``, LABEL naming the pool
call that emitted the event (for partial registrations also where the
entry's chain starts: ``first-block``, or ``unheld-start`` when the pool no
longer holds the hash at the start of the entry's cache block; ``shared``
when another KV cache group holds one of its boundaries, class K7), with
``+added`` when the event is one the baseline tree does not emit in that
operation. ``M:LABEL`` counts stores whose per-hash metadata (extra keys,
lookahead tokens, LoRA) disagrees with an earlier store of the same hash over
the same window. Three consumer models replay each stream: ``count`` (the
contract's multiset), ``set`` (a flat set, as llm-d's index keeps hashes) and
``tree`` (a radix tree that, as NVIDIA Dynamo's does, rejects a store whose
parent it does not hold and drops a node's subtree when the node is
removed). After every operation each model's *misses* are the hashes the
pool holds that the model does not.

A C6 finding on a hash the baseline's view also keeps live while the pool
does not hold it is ``C6:leak`` (pristine stores some held hashes twice and
removes them once, and its own C6 misses such a hash whenever a store names
it as a parent); a tier's ``C6:leak`` is bounded by every hash the baseline
leaks at that point. A tier may rewrite a baseline store that breaks C1 or
C3, or whose call named a parent the pool did not hold (contract rule C7,
for a tier that fixes K4); any other baseline event it drops or reorders
counts as worse.

Per tier the script prints, per class: the total on both trees and the
operations where the tier has more than the baseline (must be 0); per model:
misses summed over operations on both trees and the operations where the
tier misses more (must be 0), and the tree model's rejected stores and
removals. The exit status is 1 when an operation is worse anywhere.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from harness.workloads import compat

SCRIPT = Path(__file__).resolve()
REPO_ROOT = SCRIPT.parents[2]

# Configs: hash block size, block size per KV cache group, blocks in the
# pool, and what the requests carry. A "sparse" group replaces blocks that
# scrolled out of its window by the null block and masks some others, as
# sliding-window and Mamba align-mode managers do.
CONFIGS: dict[str, dict[str, Any]] = {
    "pool-2x12": {"hbs": 2, "groups": [12], "blocks": 24},
    "pool-4x16": {"hbs": 4, "groups": [16], "blocks": 20},
    "pool-16x64": {"hbs": 16, "groups": [64], "blocks": 24},
    "hybrid-2x6+12": {"hbs": 2, "groups": [6, 12], "blocks": 40, "sparse": 1},
    "sparse-4x16": {"hbs": 4, "groups": [16], "blocks": 24, "sparse": 0},
    "meta-4x16": {
        "hbs": 4,
        "groups": [16],
        "blocks": 24,
        "lora": True,
        "mm": True,
        "lookahead": 2,
        "salt": True,
    },
}

# Operation -> weight.
OPS = {
    "new": 26,
    "extend": 20,
    "entry": 8,
    "free": 12,
    "pressure": 6,
    "evict-cached": 5,
    "evict-in-use": 5,
    "evict-direct": 4,
    "replace": 5,
    "move": 4,
    "reset": 1,
}
VOCAB = 6


# --------------------------------------------------------------------------
# Child: drives one tree's BlockPool
# --------------------------------------------------------------------------


def has_lookahead() -> bool:
    import inspect

    from vllm.v1.core.block_pool import BlockPool

    return "num_hash_lookahead_tokens" in inspect.signature(BlockPool).parameters


LOOKAHEAD = False  # set in the child, from the tree's BlockPool


class Fuzzer:
    """Seeded operations over one BlockPool; every decision depends only on
    the pool's state, which is the same in every tree."""

    def __init__(self, rng: random.Random, spec: dict[str, Any]):
        from vllm.v1.core.block_pool import BlockPool

        self.rng = rng
        self.hbs = spec["hbs"]
        self.block_sizes = spec["groups"]
        self.sparse = spec.get("sparse")
        self.spec = spec
        # Lookahead tokens exist from vLLM 0.33 on.
        self.lookahead = spec.get("lookahead", 0) if LOOKAHEAD else 0
        options = {"num_hash_lookahead_tokens": self.lookahead} if LOOKAHEAD else {}
        self.pool = BlockPool(
            num_gpu_blocks=spec["blocks"],
            enable_caching=True,
            hash_block_size=self.hbs,
            enable_kv_cache_events=True,
            **options,
        )
        longest = 3 * max(self.block_sizes)
        self.documents = [
            [rng.randrange(VOCAB) for _ in range(longest)] for _ in range(3)
        ]
        # Multimodal placeholders per document, shared by prompts that share it.
        self.mm = [
            sorted(rng.sample(range(0, longest - 4, 4), 3)) for _ in self.documents
        ]
        self.running: list[dict[str, Any]] = []
        self.issued = 0
        self.events: list[tuple[str, Any]] = []
        # Digest of every labelled call, to check the trees made the same ones.
        self.calls = hashlib.sha256()

    # -- requests -----------------------------------------------------------

    def make_request(self, tokens: list[int], document: int) -> Any:
        from vllm.lora.request import LoRARequest
        from vllm.multimodal.inputs import (
            MultiModalFeatureSpec,
            MultiModalKwargsItem,
            PlaceholderRange,
        )
        from vllm.sampling_params import SamplingParams
        from vllm.utils.hashing import sha256
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher
        from vllm.v1.request import Request

        rng, spec = self.rng, self.spec
        self.issued += 1
        mm_features = None
        if spec.get("mm") and rng.random() < 0.5:
            mm_features = [
                MultiModalFeatureSpec(
                    data=MultiModalKwargsItem.dummy(),
                    mm_position=PlaceholderRange(offset=offset, length=3),
                    identifier=f"doc{document}-{offset}",
                    modality="image",
                )
                for offset in self.mm[document]
                if offset + 3 <= len(tokens)
            ] or None
        lora = None
        if spec.get("lora") and rng.random() < 0.4:
            lora = LoRARequest("adapter", 7, "/adapter")
        salt = "salt" if spec.get("salt") and rng.random() < 0.2 else None
        sampling_params = SamplingParams(max_tokens=1 << 20)
        sampling_params.update_from_generation_config({}, eos_token_id=VOCAB + 1)
        return Request(
            request_id=str(self.issued),
            prompt_token_ids=tokens,
            mm_features=mm_features,
            sampling_params=sampling_params,
            pooling_params=None,
            block_hasher=get_request_block_hasher(
                self.hbs, sha256, *([self.lookahead] if LOOKAHEAD else [])
            ),
            lora_request=lora,
            cache_salt=salt,
            **compat.session(Request, f"session-{self.issued % 3}"),
        )

    def hashed_tokens(self, request: Any) -> int:
        return len(request.block_hashes) * self.hbs

    # -- labelled pool calls ------------------------------------------------

    def take(self, label: str) -> None:
        self.calls.update(label.encode() + b"\0")
        self.events += [(label, event) for event in self.pool.take_events()]

    def held(self, group: int, block_hash: Any) -> bool:
        from vllm.v1.core.kv_cache_utils import make_block_hash_with_group_id

        key = make_block_hash_with_group_id(block_hash, group)
        return self.pool.cached_block_hash_to_block.get_one_block(key) is not None

    def partial_label(self, request, block, num_tokens, group, replace) -> str:
        from vllm.v1.core.kv_cache_utils import make_block_hash_with_group_id

        if block.is_null:
            return "partial:null"
        key = make_block_hash_with_group_id(
            request.block_hashes[num_tokens // self.hbs - 1], group
        )
        if replace:
            kind = "replace"
        elif block.block_hash == key or self.pool.cached_block_hash_to_block.contain(
            key, block.block_id
        ):
            return "partial:cached"
        elif (
            block.block_hash is not None
            and block.block_hash_num_tokens is not None
            and block.block_hash_num_tokens < num_tokens
        ):
            kind = (
                "promotion-by-one"
                if block.block_hash_num_tokens == num_tokens - self.hbs
                else "promotion-by-more"
            )
        else:
            kind = "first"
        position = self.chain_start(request, num_tokens, group)
        if (
            not position
            and kind in ("first", "replace")
            and self.other_group_holds_a_boundary(request, num_tokens, group)
        ):
            position = "-shared"
        return f"partial:{kind}{position}"

    def other_group_holds_a_boundary(self, request, num_tokens: int, group: int):
        """Whether another group holds one of the hashes between the entry's
        cache block start and the entry (groups share external hashes: K7)."""
        start = (num_tokens - 1) // self.block_sizes[group] * self.block_sizes[group]
        return any(
            self.held(other, request.block_hashes[end // self.hbs - 1])
            for other in range(len(self.block_sizes))
            if other != group
            for end in range(start + self.hbs, num_tokens, self.hbs)
        )

    def chain_start(self, request, num_tokens: int, group: int) -> str:
        """Where the entry's chain starts: ``-block-end`` for an entry that
        ends its cache block, ``-first-block`` inside the first cache block,
        ``-unheld-start`` when the pool does not hold the hash at the start of
        the entry's cache block (evicted, null or masked), else nothing."""
        block_size = self.block_sizes[group]
        if num_tokens % block_size == 0:
            return "-block-end"
        start = (num_tokens - 1) // block_size * block_size
        if start == 0:
            return "-first-block"
        if not self.held(group, request.block_hashes[start // self.hbs - 1]):
            return "-unheld-start"
        return ""

    def cache_partial(self, request, block, num_tokens, group, replace=False) -> None:
        label = self.partial_label(request, block, num_tokens, group, replace)
        self.pool.cache_partial_block(
            request=request,
            block=block,
            num_tokens=num_tokens,
            kv_cache_group_id=group,
            block_size=self.block_sizes[group],
            **compat.replacement(self.pool, replace),
        )
        self.take(label)

    def cache_full(self, running, group: int) -> None:
        request = running["request"]
        block_size = self.block_sizes[group]
        blocks = running["blocks"][group]
        num_full = min(request.num_tokens, self.hashed_tokens(request)) // block_size
        num_cached = running["cached"][group]
        if num_full <= num_cached:
            return
        mask = None
        if group == self.sparse and self.rng.random() < 0.3:
            mask = [self.rng.random() < 0.7 for _ in range(num_full - num_cached)]
        label = "full-sparse" if group == self.sparse else "full"
        if num_cached and not self.held(
            group, request.block_hashes[num_cached * block_size // self.hbs - 1]
        ):
            label += "-unheld-parent"
        self.pool.cache_full_blocks(
            request=request,
            blocks=blocks,
            num_cached_blocks=num_cached,
            num_full_blocks=num_full,
            block_size=block_size,
            kv_cache_group_id=group,
            block_mask=mask,
        )
        running["cached"][group] = num_full
        self.take(label)

    def tail_boundary(self, request, group: int, limit: int) -> int:
        """The prompt-tail boundary FullAttentionManager registers."""
        block_size = self.block_sizes[group]
        boundary = min(limit, self.hashed_tokens(request)) // self.hbs * self.hbs
        return 0 if boundary % block_size == 0 else boundary

    # -- operations ---------------------------------------------------------

    def step(self) -> str:
        name = self.rng.choices(list(OPS), list(OPS.values()))[0]
        getattr(self, "op_" + name.replace("-", "_"))()
        return name

    def op_new(self) -> None:
        rng = self.rng
        document = rng.randrange(len(self.documents))
        length = rng.randint(1, len(self.documents[0]))
        shared = rng.randint(0, length) if rng.random() < 0.8 else length
        tokens = self.documents[document][:shared] + [
            rng.randrange(VOCAB) for _ in range(length - shared)
        ]
        request = self.make_request(tokens, document)
        plan = []
        for group, block_size in enumerate(self.block_sizes):
            hits = [] if rng.random() < 0.25 else self.cache_hits(request, group)
            needed = -(-length // block_size) - len(hits)
            # The sparse group keeps only its last two blocks; the rest
            # are null, never allocated.
            nulls = 0
            if group == self.sparse:
                nulls = max(0, needed - 2) if rng.random() < 0.6 else 0
            plan.append((hits, needed, nulls))
        fresh = sum(needed - nulls for _, needed, nulls in plan)
        reclaimed = len(
            {b.block_id for hits, _, _ in plan for b in hits if not b.ref_cnt}
        )
        if fresh > self.pool.get_num_free_blocks() - reclaimed:
            return
        running = {"request": request, "blocks": [], "cached": []}
        for group, (hits, needed, nulls) in enumerate(plan):
            self.pool.touch(hits)
            self.take("touch")
            new = self.pool.get_new_blocks(needed - nulls)
            self.take("evict:allocate")
            running["blocks"].append(hits + [self.pool.null_block] * nulls + new)
            running["cached"].append(len(hits))
            if (
                hits
                and rng.random() < 0.3
                and compat.pool_methods(self.pool, ["emit_cached_block_events"])
            ):
                self.pool.emit_cached_block_events(
                    request, len(hits), self.block_sizes[group], group
                )
                self.take("hits")
        self.running.append(running)
        for group in range(len(self.block_sizes)):
            self.cache_full(running, group)
            boundary = self.tail_boundary(request, group, length - 1)
            if boundary:
                block = running["blocks"][group][boundary // self.block_sizes[group]]
                self.cache_partial(request, block, boundary, group)

    def cache_hits(self, request, group: int) -> list:
        block_size = self.block_sizes[group]
        hashes = compat.block_hashes_at(request.block_hashes, self.hbs, block_size)
        hits = []
        for index in range((request.num_tokens - 1) // block_size):
            if index >= len(hashes):
                break
            cached = self.pool.get_cached_block(hashes[index], [group])
            if cached is None:
                break
            hits.append(cached[0])
        return hits

    def pick(self) -> dict[str, Any] | None:
        return self.rng.choice(self.running) if self.running else None

    def op_extend(self) -> None:
        """Decode: append tokens (one or several hash blocks), cache what is
        full and maybe register the new tail (a promotion)."""
        running = self.pick()
        if running is None:
            return
        request, rng = running["request"], self.rng
        count = rng.choice([1, self.hbs, 2 * self.hbs, rng.randint(1, 3 * self.hbs)])
        total = request.num_tokens + count
        needed = [
            -(-total // size) - len(running["blocks"][group])
            for group, size in enumerate(self.block_sizes)
        ]
        if sum(needed) > self.pool.get_num_free_blocks():
            return
        request.append_output_token_ids([rng.randrange(VOCAB) for _ in range(count)])
        for group, extra in enumerate(needed):
            running["blocks"][group] += self.pool.get_new_blocks(extra)
            self.take("evict:allocate")
            self.cache_full(running, group)
            boundary = self.tail_boundary(request, group, request.num_tokens)
            if boundary and rng.random() < 0.7:
                block = running["blocks"][group][boundary // self.block_sizes[group]]
                self.cache_partial(request, block, boundary, group)

    def op_entry(self) -> None:
        """An entry at a random boundary of a running request: inner
        boundaries of other entries' chains end up held by the pool."""
        running = self.pick()
        if running is None:
            return
        request = running["request"]
        group = self.rng.randrange(len(self.block_sizes))
        limit = min(request.num_tokens, self.hashed_tokens(request)) // self.hbs
        if limit == 0:
            return
        num_tokens = self.rng.randint(1, limit) * self.hbs
        block_size = self.block_sizes[group]
        if num_tokens % block_size == 0:
            return
        block = running["blocks"][group][num_tokens // block_size]
        self.cache_partial(request, block, num_tokens, group)

    def op_free(self) -> None:
        if not self.running:
            return
        running = self.running.pop(self.rng.randrange(len(self.running)))
        for blocks in running["blocks"]:
            order = blocks[::-1] if self.rng.random() < 0.8 else blocks
            self.pool.free_blocks(order)
        self.take("free")

    def op_pressure(self) -> None:
        free = self.pool.get_num_free_blocks()
        if free:
            blocks = self.pool.get_new_blocks(self.rng.randint(1, free))
            self.take("evict:allocate")
            self.pool.free_blocks(blocks)
            self.take("free")

    def op_evict_cached(self) -> None:
        cached = [
            block.block_id
            for block in self.pool.blocks
            if block.ref_cnt == 0 and block.block_hash is not None
        ]
        if cached:
            chosen = self.rng.sample(cached, self.rng.randint(1, len(cached)))
            self.pool.evict_blocks(set(chosen))
            self.take("evict:connector")

    def in_use_cached(self) -> list:
        return [
            block
            for running in self.running
            for blocks in running["blocks"]
            for block in blocks
            if not block.is_null and block.block_hash is not None
        ]

    def op_evict_in_use(self) -> None:
        """A connector reports blocks in use as invalid (a failed load)."""
        blocks = self.in_use_cached()
        if blocks:
            chosen = self.rng.sample(blocks, self.rng.randint(1, min(3, len(blocks))))
            self.pool.evict_blocks({block.block_id for block in chosen})
            self.take("evict:connector-in-use")

    def op_evict_direct(self) -> None:
        """The Mamba manager drops a transient checkpoint's hashes directly."""
        blocks = self.in_use_cached()
        if blocks:
            self.pool._maybe_evict_cached_block(self.rng.choice(blocks))
            self.take("evict:direct")

    def op_replace(self) -> None:
        """Re-key a block in place at a boundary inside it (Mamba checkpoint);
        none before vLLM 0.30, which has no in-place replacement."""
        running = self.pick()
        if running is None or not compat.can_replace_existing_hashes(self.pool):
            return
        request = running["request"]
        group = self.rng.randrange(len(self.block_sizes))
        block_size = self.block_sizes[group]
        limit = min(request.num_tokens, self.hashed_tokens(request)) // self.hbs
        if limit == 0:
            return
        num_tokens = self.rng.randint(1, limit) * self.hbs
        block = running["blocks"][group][(num_tokens - 1) // block_size]
        if block.is_null or (block.ref_cnt != 1 and self.rng.random() < 0.8):
            return
        self.cache_partial(request, block, num_tokens, group, replace=True)

    def op_move(self) -> None:
        """A running request keeps writing into its block: the prefix cache
        keeps a private copy under the same hashes; none before vLLM 0.26,
        which has no move_block_hashes."""
        if not compat.can_move_block_hashes(self.pool):
            return
        sources = [block for block in self.in_use_cached() if block.ref_cnt == 1]
        if not sources or not self.pool.get_num_free_blocks():
            return
        source = self.rng.choice(sources)
        [copy] = self.pool.get_new_blocks(1)
        self.take("evict:allocate")
        if copy.block_hash is not None or copy.is_null:
            self.pool.free_blocks([copy])
            return
        self.pool.move_block_hashes(source, copy)
        self.take("move")
        self.pool.free_blocks([copy])
        self.take("free")

    def op_reset(self) -> None:
        self.free_all()
        assert self.pool.reset_prefix_cache()
        self.take("reset")

    def free_all(self) -> None:
        while self.running:
            for blocks in self.running.pop()["blocks"]:
                self.pool.free_blocks(blocks[::-1])
        self.take("free")

    def evict_everything(self) -> bool:
        self.free_all()
        free = self.pool.get_num_free_blocks()
        self.pool.free_blocks(self.pool.get_new_blocks(free))
        self.take("evict:allocate")
        return free == self.pool.num_gpu_blocks - 1

    def held_hashes(self) -> dict[tuple[str, int], set]:
        from vllm.v1.core.kv_cache_utils import (
            get_block_hash,
            get_group_id,
            maybe_convert_block_hash,
        )

        held: dict[tuple[str, int], set] = defaultdict(set)
        for key in self.pool.cached_block_hash_to_block._cache:
            held[(compat.pool_medium(self.pool), get_group_id(key))].add(
                maybe_convert_block_hash(get_block_hash(key))
            )
        return held


# KVCacheManager workloads of the harness (harness/workloads/workloads.py), hybrid
# groups included: Mamba align mode and sliding window.
MANAGER_CONFIGS = ("manager-full", "manager-mamba", "manager-swa")


class ManagerFuzzer:
    """A harness KVCacheManager workload, plus ``evict_blocks`` of blocks in
    use, labelled like `Fuzzer`'s calls."""

    def __init__(self, rng: random.Random, config: str, harness: SimpleNamespace):
        self.rng = rng
        self.harness = harness
        self.driver = harness.WORKLOADS[config](rng)
        self.pool = self.driver.pool
        self.hbs = self.pool.hash_block_size
        self.block_sizes = self.driver.block_sizes
        self.labeller = self._labeller()
        self.events: list[tuple[str, Any]] = []
        self.calls = hashlib.sha256()

    def _labeller(self):
        fuzzer = self

        class Labeller(self.harness.EventLabeller):
            def _label(self, name, arguments):
                label = super()._label(name, arguments)
                kind, _, group_kind = label.partition("@")
                if kind not in (
                    "partial:first",
                    "partial:first-block",
                    "partial:replace",
                    "partial:replace-first-block",
                    "partial:promotion",
                ):
                    return label
                kind = kind.replace("-first-block", "").replace("first-block", "first")
                block = arguments["block"]
                num_tokens = arguments["num_tokens"]
                if kind == "partial:promotion":
                    by_one = block.block_hash_num_tokens == num_tokens - fuzzer.hbs
                    kind += "-by-one" if by_one else "-by-more"
                start = Fuzzer.chain_start(
                    fuzzer,
                    arguments["request"],
                    num_tokens,
                    arguments["kv_cache_group_id"],
                )
                return f"{kind}{start}@{group_kind}"

        return Labeller(self.pool, self.driver.group_kinds)

    held = Fuzzer.held
    held_hashes = Fuzzer.held_hashes

    def take(self) -> None:
        self.events += self.labeller.take(self.driver.manager.take_events())

    def step(self) -> str:
        if self.rng.random() < 0.08:
            in_use = [
                block.block_id
                for block in self.pool.blocks
                if block.ref_cnt and block.block_hash is not None and not block.is_null
            ]
            if in_use:
                chosen = self.rng.sample(
                    in_use, self.rng.randint(1, min(3, len(in_use)))
                )
                self.driver.manager.evict_blocks(set(chosen))
            self.calls.update(b"evict-in-use")
            self.take()
            return "evict-in-use"
        name = self.driver.step()
        self.calls.update(name.encode())
        self.take()
        return name

    def evict_everything(self) -> bool:
        drained = self.harness.evict_everything(self.driver)
        self.take()
        return drained


class TreeModel:
    """A consumer that, like Dynamo's radix tree, rejects a store whose parent
    it does not hold and drops a node's whole subtree when it is removed. It
    also rejects a store whose tokens are not its hashes' (rule C3), which a
    consumer that hashes each block's tokens, as Dynamo does, cannot index."""

    def __init__(self):
        self.parent: dict[Any, dict] = defaultdict(dict)
        self.children: dict[Any, dict] = defaultdict(lambda: defaultdict(set))
        self.rejected_stores = 0
        self.rejected_removals = 0

    def apply(self, view, event, stored: bool) -> None:
        parents, children = self.parent[view], self.children[view]
        if stored:
            parent = event.parent_block_hash
            spans = len(event.token_ids) == event.block_size * len(event.block_hashes)
            if not spans or (parent is not None and parent not in parents):
                self.rejected_stores += 1
                return
            for block_hash in event.block_hashes:
                if block_hash not in parents:
                    parents[block_hash] = parent
                    children[parent].add(block_hash)
                parent = block_hash
            return
        for block_hash in event.block_hashes:
            if block_hash not in parents:
                self.rejected_removals += 1
                continue
            children[parents.pop(block_hash)].discard(block_hash)
            stack = [block_hash]
            while stack:
                for child in children.pop(stack.pop(), ()):
                    parents.pop(child, None)
                    stack.append(child)

    def clear(self) -> None:
        self.parent.clear()
        self.children.clear()


def project() -> SimpleNamespace:
    """What this script takes from the project's harness: the stream checker
    and its wire structs, and the KVCacheManager workload drivers. One import
    block, to repoint when the harness moves them."""
    from harness.contract.checker import HashModel, StreamChecker
    from harness.contract.wire import AllBlocksCleared, BlockStored, decode_event
    from harness.workloads.drivers import CONFIGS, evict_everything
    from harness.workloads.labeller import EventLabeller

    return SimpleNamespace(
        AllBlocksCleared=AllBlocksCleared,
        BlockStored=BlockStored,
        HashModel=HashModel,
        StreamChecker=StreamChecker,
        decode_event=decode_event,
        WORKLOADS=CONFIGS,
        EventLabeller=EventLabeller,
        evict_everything=evict_everything,
    )


def fuzzer_lookahead(fuzzer) -> int:
    return getattr(fuzzer, "lookahead", 0)


def fuzz(config: str, seed: int, ops: int) -> dict[str, Any]:
    import msgspec
    from vllm.utils.hashing import sha256
    from vllm.v1.core import kv_cache_utils

    harness = project()
    AllBlocksCleared, BlockStored = harness.AllBlocksCleared, harness.BlockStored
    kv_cache_utils.init_none_hash(sha256)
    rng = random.Random(seed)
    if config in MANAGER_CONFIGS:
        fuzzer = ManagerFuzzer(rng, config, harness)
        spec = {"hbs": fuzzer.hbs}
    else:
        spec = CONFIGS[config]
        fuzzer = Fuzzer(rng, spec)
    hbs = spec["hbs"]
    plain = not (spec.get("lora") or spec.get("mm") or fuzzer_lookahead(fuzzer))
    hash_model = None
    if plain and not spec.get("salt"):
        import pickle

        none_hash = kv_cache_utils.NONE_HASH
        int_hashes = kv_cache_utils.envs.VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES

        def chunk_hash(parent, tokens, extra_keys):
            chained = (parent or none_hash, tokens, extra_keys)
            return hashlib.sha256(
                pickle.dumps(chained, protocol=pickle.HIGHEST_PROTOCOL)
            ).digest()

        def external(chain):
            if int_hashes:
                return int.from_bytes(chain, "big") & ((1 << 64) - 1)
            return chain

        hash_model = harness.HashModel(hbs, chunk_hash, external)
    checker = harness.StreamChecker(hash_model=hash_model, track_ancestry=True)
    encoder = msgspec.msgpack.Encoder()
    flat: dict[Any, set] = defaultdict(set)
    tree = TreeModel()
    metadata: dict[tuple, tuple] = {}
    records = []

    def settle(name: str) -> None:
        labelled, fuzzer.events = fuzzer.events, []
        encoded = [encoder.encode(event) for _, event in labelled]
        events = [harness.decode_event(data) for data in encoded]
        seen = len(checker.violations)
        checker.apply(events)
        found = [(v.rule, v.event) for v in checker.violations[seen:]]
        for index, event in enumerate(events):
            if type(event) is AllBlocksCleared:
                flat.clear()
                tree.clear()
                continue
            view = (event.medium, event.group_idx)
            stored = type(event) is BlockStored
            if stored:
                flat[view].update(event.block_hashes)
                if event.block_size == hbs:
                    extra_keys = event.extra_keys or [None] * len(event.block_hashes)
                    lookahead = event.lookahead_token_ids or [None] * len(
                        event.block_hashes
                    )
                    for position, block_hash in enumerate(event.block_hashes):
                        meta = (
                            repr(extra_keys[position]),
                            repr(lookahead[position]),
                            event.lora_id,
                            event.lora_name,
                        )
                        known = metadata.setdefault((view, block_hash), meta)
                        if known != meta:
                            found.append(("M", index))
            else:
                flat[view].difference_update(event.block_hashes)
            tree.apply(view, event, stored)
        held = fuzzer.held_hashes()
        fuzzer.calls.update(repr(sorted(map(sorted, held.values()))).encode())
        seen = len(checker.violations)
        checker.check_pool(held)
        c6 = [[f"view {v.view}", repr(v.hashes[0])] for v in checker.violations[seen:]]
        found += [("C6", None)] * len(c6)
        unheld_live = [
            [f"view {view}", repr(block_hash)]
            for view, live in checker.views.items()
            for block_hash in live
            if block_hash not in held.get(view, ())
        ]
        misses = Counter()
        for view, hashes in held.items():
            live = checker.views.get(view, {})
            misses["count"] += sum(1 for h in hashes if h not in live)
            misses["set"] += len(hashes - flat[view])
            misses["tree"] += sum(1 for h in hashes if h not in tree.parent[view])
        records.append(
            {
                "name": name,
                "events": [
                    [
                        label,
                        hashlib.blake2b(data, digest_size=8).hexdigest(),
                        type(event).__name__,
                        [str(h) for h in getattr(event, "block_hashes", None) or ()],
                    ]
                    for (label, _), data, event in zip(
                        labelled, encoded, events, strict=True
                    )
                ],
                "found": found,
                "c6": c6,
                "unheld_live": unheld_live,
                "misses": dict(misses),
            }
        )

    for _ in range(ops):
        settle(fuzzer.step())
    drained = fuzzer.evict_everything()
    settle("evict-everything")
    if drained:
        seen = len(checker.violations)
        checker.check_drained()
        records[-1]["found"] += [("C5", None)] * (len(checker.violations) - seen)
    return {
        "ops": records,
        "calls": fuzzer.calls.hexdigest(),
        "tree_rejections": [tree.rejected_stores, tree.rejected_removals],
    }


def child() -> int:
    global LOOKAHEAD
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    LOOKAHEAD = has_lookahead()  # imports vLLM, which may log to stdout
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = fuzz(request["config"], request["seed"], request["ops"])
        except Exception as exc:  # reported to the parent, which stops
            import traceback

            traceback.print_exc()
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()
    return 0


# --------------------------------------------------------------------------
# Parent: compares the trees operation by operation
# --------------------------------------------------------------------------


class Child:
    def __init__(self, tree: Path, log: Path):
        self.tree = tree
        self.log = log
        self.log_file = log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, str(SCRIPT), "--child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log_file,
            env={
                **os.environ,
                "PYTHONPATH": f"{tree}{os.pathsep}{REPO_ROOT}",
                "VLLM_TARGET_DEVICE": "cpu",
                "PYTHONHASHSEED": "0",
            },
            text=True,
        )

    def send(self, request: dict[str, Any]) -> None:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()

    def receive(self) -> dict[str, Any]:
        line = self.process.stdout.readline()
        reply = json.loads(line) if line else {"error": "the child exited"}
        if "error" in reply:
            tail = "\n".join(self.log.read_text().splitlines()[-20:])
            raise SystemExit(f"{self.tree}: {reply['error']}\n{tail}")
        return reply

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()
        self.log_file.close()


def classes(
    record: dict[str, Any], added: set[int], baseline: dict[str, Any] | None = None
) -> Counter:
    """``RULE:LABEL[+added]`` for each violation of one operation.

    A C6 finding on a hash that the baseline's view (``baseline``, or the
    record's own) keeps live while the pool does not hold it is ``C6:leak``:
    pristine stores some held hashes twice and removes them once, so its
    view keeps them after the pool lets them go. A leaked hash is a C6
    finding only while no store names it as its parent, so `Tally` bounds a
    tier's ``C6:leak`` by every hash the baseline leaks, shown or not.
    """
    found: Counter = Counter()
    leaks = {tuple(pair) for pair in (baseline or record)["unheld_live"]}
    for view, block_hash in record["c6"]:
        if (view, block_hash) in leaks:
            found["C6:leak"] += 1
    found["C6"] -= found["C6:leak"]
    for rule, index in record["found"]:
        if index is None:
            found[rule] += 1
            continue
        label = record["events"][index][0]
        found[f"{rule}:{label}{'+added' if index in added else ''}"] += 1
    return +found


# Labels of the calls whose stores can name a parent the pool does not hold
# (classes K4 and K6): a full block after one the pool does not hold, an
# entry in a block whose start it does not hold, an entry that ends its block.
UNHELD_PARENT_LABELS = ("-unheld-parent", "-unheld-start", "-block-end")


def rewritable_events(record: dict[str, Any], holdings: bool = False) -> set[int]:
    """Indexes of the baseline's events a strict patch may rewrite (contract
    rule C7): stores that break C1 or C3 themselves, or that come from a call
    whose stores can name a parent the pool does not hold, which only a leak
    (see `classes`) keeps live in a view; for a tier whose stream is the
    pool's holdings, every partial entry's store too."""
    broken = {index for rule, index in record["found"] if rule in ("C1", "C3")}
    return broken | {
        index
        for index, (label, _, kind, _) in enumerate(record["events"])
        if kind == "BlockStored"
        and (
            any(mark in label for mark in UNHELD_PARENT_LABELS)
            or (holdings and label.startswith("partial:"))
        )
    }


def added_events(
    baseline: list, patched: list, rewritable: set[int] = frozenset()
) -> tuple[set[int], set[int]] | None:
    """Indexes of the patched events the baseline does not have, and of the
    baseline's events the patched run rewrote, matching the baseline's events
    (label, bytes and kind) in order as the conformance suite does (None: one
    that is not rewritable is missing or reordered)."""
    from harness.contract.classes import align

    matches = align(baseline, patched, rewritable, key=tuple)
    if matches is None:
        return None
    rewritten = {position for position, match in enumerate(matches) if match is None}
    return set(range(len(patched))) - set(matches), rewritten


class Tally:
    """One tier against the baseline, over every run."""

    def __init__(self, holdings: bool = False):
        # The tier's stream is the pool's holdings (docs/contract.md): it may
        # rewrite partial-entry stores, must add no event but rewritten
        # stores, and may keep live only the hashes the pool holds or the
        # baseline also keeps (C6 both ways, "C6:unheld").
        self.holdings = holdings
        self.totals: dict[str, Counter] = defaultdict(Counter)  # class -> tree
        self.worse_ops: Counter = Counter()
        self.misses: dict[str, Counter] = defaultdict(Counter)  # model -> tree
        self.worse_miss_ops: Counter = Counter()
        self.better_miss_ops: Counter = Counter()
        self.rejections: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.reordered = 0
        self.rewritten = 0
        self.mismatched_calls: list[str] = []
        self.witnesses: list[str] = []
        self.ops = 0

    def add(self, run: str, base: dict, tier: dict, show: int) -> None:
        if base["calls"] != tier["calls"]:
            self.mismatched_calls.append(run)
            return
        for label, reply in (("baseline", base), ("tier", tier)):
            for index, value in enumerate(reply["tree_rejections"]):
                self.rejections[label][index] += value
        for op, (old, new) in enumerate(zip(base["ops"], tier["ops"], strict=True)):
            self.ops += 1
            aligned = added_events(
                old["events"], new["events"], rewritable_events(old, self.holdings)
            )
            if aligned is None:
                self.reordered += 1
                aligned = set(), set()
                if len(self.witnesses) < show:
                    self.witnesses.append(
                        f"{run} op {op} ({new['name']}): baseline events missing "
                        "or reordered"
                    )
            added, rewritten = aligned
            self.rewritten += len(rewritten)
            # An added store of the call whose baseline store it rewrote is
            # that store, rewritten: counted under the call's class.
            rewrites = {old["events"][i][0] for i in rewritten}
            new_only = {i for i in added if new["events"][i][0] not in rewrites}
            before, after = classes(old, set()), classes(new, new_only, old)
            bound = before.copy()
            bound["C6:leak"] = len(old["unheld_live"])
            if self.holdings:
                kept = {tuple(pair) for pair in old["unheld_live"]}
                after["C6:unheld"] = sum(
                    tuple(pair) not in kept for pair in new["unheld_live"]
                )
                # An added event may only store again what a rewritten
                # baseline store stored.
                again = {h for i in rewritten for h in old["events"][i][3]}
                after["C7:added"] = sum(
                    new["events"][i][2] != "BlockStored"
                    or not set(new["events"][i][3]) <= again
                    for i in added
                )
            for cls in before | after:
                self.totals[cls]["baseline"] += before[cls]
                self.totals[cls]["tier"] += after[cls]
                if after[cls] > bound[cls]:
                    self.worse_ops[cls] += 1
                    if len(self.witnesses) < show:
                        self.witnesses.append(
                            f"{run} op {op} ({new['name']}): {cls} "
                            f"{before[cls]} -> {after[cls]}"
                        )
            for model in ("count", "set", "tree"):
                a, b = old["misses"].get(model, 0), new["misses"].get(model, 0)
                self.misses[model]["baseline"] += a
                self.misses[model]["tier"] += b
                if b > a:
                    self.worse_miss_ops[model] += 1
                    if len(self.witnesses) < show:
                        self.witnesses.append(
                            f"{run} op {op} ({new['name']}): {model} model "
                            f"misses {a} -> {b}"
                        )
                elif b < a:
                    self.better_miss_ops[model] += 1

    def worse(self) -> bool:
        return bool(
            sum(self.worse_ops.values())
            or sum(self.worse_miss_ops.values())
            or self.reordered
            or self.mismatched_calls
        )

    def report(self, base: str, tier: str) -> list[str]:
        lines = [
            f"## {tier} against {base}: {self.ops} operations",
            "",
            f"| class | {base} | {tier} | operations where {tier} has more |",
            "| --- | ---: | ---: | ---: |",
        ]
        for cls in sorted(self.totals):
            counts = self.totals[cls]
            lines.append(
                f"| {cls} | {counts['baseline']:,} | {counts['tier']:,} "
                f"| {self.worse_ops[cls]} |"
            )
        lines += [
            "",
            f"| model | misses, {base} | misses, {tier} | operations where "
            f"{tier} misses more | ... fewer |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for model in ("count", "set", "tree"):
            counts = self.misses[model]
            lines.append(
                f"| {model} | {counts['baseline']:,} | {counts['tier']:,} "
                f"| {self.worse_miss_ops[model]} | {self.better_miss_ops[model]} |"
            )
        base_rej, tier_rej = self.rejections["baseline"], self.rejections["tier"]
        lines += [
            "",
            f"tree model rejections (stores / removals): {base} "
            f"{base_rej[0]:,} / {base_rej[1]:,}, {tier} {tier_rej[0]:,} / "
            f"{tier_rej[1]:,}",
            f"{base} events {tier} rewrote (each broke C1 or C3, or named a "
            f"parent the pool did not hold): {self.rewritten:,}",
            f"operations where other {base} events are missing or reordered in "
            f"{tier}: {self.reordered}",
        ]
        if self.mismatched_calls:
            lines.append("pool calls DIFFER in: " + ", ".join(self.mismatched_calls))
        if self.witnesses:
            lines += ["", "first operations that are worse:"]
            lines += [f"- {witness}" for witness in self.witnesses]
        return lines + [""]


def default_trees() -> dict[str, Path]:
    from harness.series.apply import cached_patched_tree
    from harness.targets import get_target
    from harness.trees.sources import pristine_tree

    target = get_target("main")
    return {
        "pristine": pristine_tree(target),
        "default": cached_patched_tree(target, "default"),
        "strict": cached_patched_tree(target, "strict"),
    }


def holdings_tiers() -> set[str]:
    """The default trees whose stream is the pool's holdings (targets.toml)."""
    from harness.targets import get_target

    target = get_target("main")
    return {tier for tier in target.series if target.stream(tier) == "holdings"}


def parse_trees(specs: list[str] | None) -> dict[str, Path]:
    if not specs:
        return default_trees()
    trees = {}
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path:
            raise SystemExit(f"--tree wants LABEL=PATH, got {spec!r}")
        trees[label] = Path(path).resolve()
    return trees


def run(args) -> int:
    import tempfile

    trees = parse_trees(args.tree)
    labels = list(trees)
    base = labels[0]
    holdings = set(args.holdings or ()) if args.tree else holdings_tiers()
    tallies = {label: Tally(label in holdings) for label in labels[1:]}
    raw: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="series-fuzz-") as scratch:
        children = {
            label: Child(tree, Path(scratch) / f"{label}.log")
            for label, tree in trees.items()
        }
        try:
            for config in args.config or [*CONFIGS, *MANAGER_CONFIGS]:
                for seed in range(args.first_seed, args.first_seed + args.seeds):
                    request = {"config": config, "seed": seed, "ops": args.ops}
                    replies = {}
                    for start in range(0, len(labels), args.jobs):
                        batch = labels[start : start + args.jobs]
                        for label in batch:
                            children[label].send(request)
                        for label in batch:
                            replies[label] = children[label].receive()
                    run_name = f"{config} seed {seed}"
                    for label in labels[1:]:
                        tallies[label].add(
                            run_name, replies[base], replies[label], args.show
                        )
                    if args.json:
                        raw[run_name] = replies
                print(f"{config}: {args.seeds} seeds done", file=sys.stderr, flush=True)
        finally:
            for process in children.values():
                process.close()
    print("trees: " + ", ".join(f"{label}={tree}" for label, tree in trees.items()))
    print(
        f"configs: {', '.join(args.config or [*CONFIGS, *MANAGER_CONFIGS])}; seeds "
        f"{args.first_seed}..{args.first_seed + args.seeds - 1}; {args.ops} "
        "operations each, then evict everything"
    )
    print()
    for label, tally in tallies.items():
        print("\n".join(tally.report(base, label)))
    if args.json:
        args.json.write_text(json.dumps(raw) + "\n")
    return 1 if any(tally.worse() for tally in tallies.values()) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tests/tools/series_fuzz.py")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--tree",
        action="append",
        metavar="LABEL=PATH",
        help="a vLLM tree, the first is the baseline (repeat; default: the "
        "harness's pristine, default and strict trees of main)",
    )
    parser.add_argument(
        "--holdings",
        action="append",
        metavar="LABEL",
        help="a --tree whose stream is the pool's holdings (docs/contract.md: "
        "it may rewrite partial-entry stores and keep live only what the pool "
        "holds); repeat. Default trees: as harness/targets.toml says",
    )
    parser.add_argument(
        "--config", action="append", choices=[*CONFIGS, *MANAGER_CONFIGS]
    )
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--ops", type=int, default=300)
    parser.add_argument(
        "--jobs", type=int, default=2, help="trees run at once (default 2)"
    )
    parser.add_argument(
        "--show", type=int, default=5, help="worse operations listed per tier"
    )
    parser.add_argument("--json", type=Path, help="also write every reply here")
    args = parser.parse_args(argv)
    if args.child:
        return child()
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
