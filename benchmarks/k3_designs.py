"""Compare the two designs for promotion's removed parent (class K3).

Runs one seeded request mix with decoding tails (so partial entries are
promoted to later boundaries) against a vLLM tree and records its events.
benchmarks/k3_compare.py then prints, per tree, what a consumer sees:
unresolved parents and removals (counting replay), leaks, event volume,
pristine events missing or changed, hashes a consumer cannot recompute
from token_ids, and, where ai-dynamo-runtime is installed, what Dynamo's
radix tree rejects.

    for tree in pristine:SRC a:TREE_A b:TREE_B; do
      PYTHONPATH=${tree#*:} VLLM_TARGET_DEVICE=cpu \
      VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0 \
        python benchmarks/k3_designs.py --label ${tree%%:*} \
        --out /tmp/k3_${tree%%:*}.json
    done
    python benchmarks/k3_compare.py /tmp/k3_pristine.json /tmp/k3_a.json /tmp/k3_b.json

Design (b) is patches/0003 (tree: `python -m harness apply --target main
--tier strict`); design (a) is kept, for this comparison only, as
benchmarks/k3_design_a.patch, to apply on top of patches 0001 and 0002.
docs/series-design.md records the figures.
"""

import argparse
import json
import random
from collections import Counter

import msgspec
from vllm.distributed.kv_events import BlockRemoved, BlockStored
from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.core.block_pool import BlockPool
from vllm.v1.core.kv_cache_utils import (
    get_request_block_hasher,
    hash_block_tokens,
    init_none_hash,
)
from vllm.v1.request import Request

CONFIGS = [(2, 6), (4, 12), (16, 64), (128, 1536)]


def make_request(request_id, token_ids, hash_block_size):
    params = SamplingParams(max_tokens=1)
    params.update_from_generation_config({}, eos_token_id=100)
    return Request(
        request_id=request_id,
        prompt_token_ids=token_ids,
        sampling_params=params,
        pooling_params=None,
        block_hasher=get_request_block_hasher(hash_block_size, sha256),
    )


def run_mix(seed, hash_block_size, block_size, steps):
    """Yield the events of one seeded mix, ending with everything evicted."""
    rng = random.Random(seed)
    pool = BlockPool(
        num_gpu_blocks=24,
        enable_caching=True,
        hash_block_size=hash_block_size,
        enable_kv_cache_events=True,
    )
    prefixes = [[rng.randrange(4) for _ in range(3 * block_size)] for _ in range(3)]
    running = []
    for step in range(steps):
        if running and (len(running) > 3 or rng.random() < 0.3):
            _, blocks = running.pop(rng.randrange(len(running)))
            pool.free_blocks(reversed(blocks))
        elif (
            growing := [(r, b) for r, b in running if r.num_tokens % block_size]
        ) and rng.random() < 0.4:
            req, blocks = rng.choice(growing)
            num_full = req.num_tokens // block_size
            req.append_output_token_ids([rng.randrange(4)] * hash_block_size)
            if req.num_tokens % block_size:
                pool.cache_partial_block(
                    request=req,
                    block=blocks[num_full],
                    num_tokens=req.num_tokens,
                    kv_cache_group_id=0,
                    block_size=block_size,
                )
            else:
                pool.cache_full_blocks(
                    request=req,
                    blocks=blocks,
                    num_cached_blocks=num_full,
                    num_full_blocks=num_full + 1,
                    block_size=block_size,
                    kv_cache_group_id=0,
                )
        else:
            num_tokens = hash_block_size * rng.randrange(
                block_size // hash_block_size + 1, 3 * block_size // hash_block_size
            )
            num_blocks = -(-num_tokens // block_size)
            if num_blocks <= pool.get_num_free_blocks():
                req = make_request(
                    str(step), rng.choice(prefixes)[:num_tokens], hash_block_size
                )
                blocks = pool.get_new_blocks(num_blocks)
                num_full = num_tokens // block_size
                pool.cache_full_blocks(
                    request=req,
                    blocks=blocks,
                    num_cached_blocks=0,
                    num_full_blocks=num_full,
                    block_size=block_size,
                    kv_cache_group_id=0,
                )
                if num_tokens % block_size:
                    pool.cache_partial_block(
                        request=req,
                        block=blocks[num_full],
                        num_tokens=num_tokens,
                        kv_cache_group_id=0,
                        block_size=block_size,
                    )
                running.append((req, blocks))
        yield from pool.take_events()
    for _, blocks in running:
        pool.free_blocks(reversed(blocks))
    pool.get_new_blocks(pool.get_num_free_blocks())
    yield from pool.take_events()


def recomputes(event, parent, chunk):
    """Whether chaining token_ids in `chunk`-sized pieces from `parent`
    reproduces every reported hash."""
    hashes = []
    for start in range(0, len(event.token_ids), chunk):
        parent = hash_block_tokens(
            sha256, parent, event.token_ids[start : start + chunk]
        )
        hashes.append(parent)
    per_block = len(hashes) // len(event.block_hashes)
    return hashes[per_block - 1 :: per_block] == event.block_hashes


def measure(events, hash_block_size):
    encoder = msgspec.msgpack.Encoder()
    figures = Counter()
    live = Counter()
    for event in events:
        figures["events"] += 1
        figures["bytes"] += len(encoder.encode(event))
        if isinstance(event, BlockStored):
            parent = event.parent_block_hash
            if parent is not None and not live[parent]:
                figures["unresolved_parent"] += 1
            if not recomputes(event, parent, event.block_size):
                figures["not_recomputable_per_block"] += 1
            if not recomputes(event, parent, hash_block_size):
                figures["not_recomputable_per_hash_block"] += 1
            live.update(event.block_hashes)
        elif isinstance(event, BlockRemoved):
            for block_hash in event.block_hashes:
                if live[block_hash] <= 0:
                    figures["unknown_removal"] += 1
                live[block_hash] -= 1
    figures["leaked"] = sum((+live).values())
    return figures


def run(args):
    init_none_hash(sha256)
    encoder = msgspec.msgpack.Encoder()
    result = {}
    for hash_block_size, block_size in CONFIGS:
        total = Counter()
        streams = []
        for seed in range(args.seeds):
            events = list(run_mix(seed, hash_block_size, block_size, args.steps))
            total += measure(events, hash_block_size)
            streams.append([encoder.encode(e).hex() for e in events])
        result[f"{hash_block_size}x{block_size}"] = {
            "figures": dict(total),
            "streams": streams,
        }
    with open(args.out, "w") as f:
        json.dump({"label": args.label, "configs": result}, f)


def main():
    parser = argparse.ArgumentParser(description="Record one tree's events.")
    parser.add_argument("--label", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=200)
    run(parser.parse_args())


if __name__ == "__main__":
    main()
