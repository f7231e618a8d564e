"""What the series costs one call on the scheduler thread, as a ratio to the
released tree: the default tier's partial-entry ancestry (patch 0004), and a
hybrid model's decode through one cache block (patch 0003's Mamba runs).

    python benchmarks/partial_entry_cost.py [--tree LABEL=PATH ...]
        [--rounds 15] [--repeat 50] [--case NAME ...] [--json FILE]

The first tree is the baseline (default: the harness's cached trees of target
main, pristine and default). Each tree runs in a child process of its own
that stays up for the whole run. The cases:

- ``partial xR`` (R = 4, 16, 48, 128): ``cache_partial_block`` alone, hash
  block 16, cache block 16*R, the first cache block cached, the entry at the
  second block's last hash boundary (where 0004 reports the most boundaries);
- ``register HxBxT``: one prompt's registration (its full blocks, then its
  tail), ``stream_growth.py``'s own, at 128x1536x1800, 16x1536x4000,
  16x2048x4000 and 4x4096x8000 (one tail at 4 / 4096 / 8,000 tokens);
- ``8 sibling tails``: eight requests with the same 8,000-token prompt (as
  ``n=8`` sampling has), hash block 4, cache block 4096, the shared first
  block cached; the eight ``cache_partial_block`` calls of their tails, each
  in a block of its own;
- ``decode Nk`` (N = 1, 4, 16, 64): a hybrid KVCacheManager (full attention
  and Mamba in align mode, both block 16, hash block 16, dense retention),
  an N*1024-token prompt prefilled in chunks split as vLLM's scheduler splits
  them for Mamba (``harness.workloads.manager_driver``), then the 16 decode steps
  (``allocate_slots`` of one token each) that fill the next cache block;
- ``decode 16k, unaligned prefill``: the same with the prompt prefilled in one
  chunk that ends inside a block, so no Mamba state is cached before the
  decoded block (what a dropped or evicted checkpoint leaves);
- the same with ``events off`` (``enable_kv_cache_events=False``) for
  ``partial x128`` and ``register 16x2048x4000``.

Two figures per case and tree, each as a ratio to the baseline:

- Python lines the measured calls execute (``sys.settrace``, after a warm-up
  call), counted twice in fresh pools to show the count repeats;
- CPU time (``time.process_time``) of ``--repeat`` calls, each in a fresh
  pool prepared beforehand, per call; ``--rounds`` rounds, every round asks
  each child in turn (rotating who goes first), and the figure is the median
  of the per-round ratios, with min-max.

The events each call emits and their bytes on the wire (one
``KVEventBatch``, vLLM's msgspec encoder) are printed beside them. No figure
is asserted; the script only prints.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import benchlib
import stream_growth

SCRIPT = Path(__file__).resolve()

PARTIAL_RATIOS = (4, 16, 48, 128)
REGISTRATIONS = (*stream_growth.REGISTRATIONS, (4, 4096, 8000))
DECODE_CONTEXTS = (1, 4, 16, 64)
CASES = (
    *(f"partial x{ratio}" for ratio in PARTIAL_RATIOS),
    *("register {}x{}x{}".format(*shape) for shape in REGISTRATIONS),
    "8 sibling tails",
    *(f"decode {n}k" for n in DECODE_CONTEXTS),
    "decode 16k, unaligned prefill",
    "partial x128, events off",
    "register 16x2048x4000, events off",
)


# --------------------------------------------------------------------------
# Child: runs inside one tree
# --------------------------------------------------------------------------


def partial_alone(ratio: int, events: bool):
    from vllm.utils.hashing import sha256
    from vllm.v1.core.block_pool import BlockPool
    from vllm.v1.core.kv_cache_utils import init_none_hash

    from harness.workloads.requests import make_request

    init_none_hash(sha256)
    hash_block_size, block_size = 16, 16 * ratio
    request = make_request("prompt", list(range(2 * block_size)), hash_block_size)

    def fresh():
        pool = BlockPool(
            num_gpu_blocks=3,
            enable_caching=True,
            hash_block_size=hash_block_size,
            enable_kv_cache_events=events,
        )
        blocks = pool.get_new_blocks(2)
        pool.cache_full_blocks(request, blocks, 0, 1, block_size, 0)
        pool.take_events()
        return pool, blocks[1]

    def call(pool, block) -> None:
        pool.cache_partial_block(
            request, block, 2 * block_size - hash_block_size, 0, block_size
        )

    return fresh, call


def registration(shape: tuple[int, int, int], events: bool):
    fresh, register, _ = stream_growth.prompt_registration(*shape, events=events)
    return fresh, register


def sibling_tails(count: int = 8):
    from vllm.utils.hashing import sha256
    from vllm.v1.core.block_pool import BlockPool
    from vllm.v1.core.kv_cache_utils import init_none_hash

    from harness.workloads.requests import make_request

    init_none_hash(sha256)
    hash_block_size, block_size, tokens = 4, 4096, 8000
    requests = [
        make_request(f"sibling-{i}", list(range(tokens)), hash_block_size)
        for i in range(count)
    ]
    tail = (tokens - 1) // hash_block_size * hash_block_size

    def fresh():
        pool = BlockPool(
            num_gpu_blocks=count + 2,
            enable_caching=True,
            hash_block_size=hash_block_size,
            enable_kv_cache_events=True,
        )
        shared = pool.get_new_blocks(1)
        pool.cache_full_blocks(requests[0], shared, 0, 1, block_size, 0)
        pool.take_events()
        return pool, pool.get_new_blocks(count)

    def call(pool, blocks) -> None:
        for request, block in zip(requests, blocks, strict=True):
            pool.cache_partial_block(request, block, tail, 0, block_size)

    return fresh, call


def decode_one_block(context: int, aligned: bool):
    import random

    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import init_none_hash

    from harness.workloads.compat import (
        computed_blocks,
        release_block_copies,
        take_boundary_state_offloads,
    )
    from harness.workloads.manager_driver import ManagerDriver
    from harness.workloads.requests import VOCAB, make_request

    init_none_hash(sha256)
    rng = random.Random(0)
    prompt = [rng.randrange(VOCAB) for _ in range(context - 8)]

    def step(manager, request, num_new: int, *hit) -> None:
        manager.new_step_starts()
        assert manager.allocate_slots(request, num_new, *hit) is not None
        request.num_computed_tokens += num_new
        release_block_copies(manager)
        manager.take_new_block_ids()
        take_boundary_state_offloads(manager)

    def fresh():
        driver = ManagerDriver(
            random.Random(0),
            16,
            [("full_attention", 16), ("mamba", 16)],
            num_blocks=context // 16 + 64,
            token_budget=context,
        )
        if not aligned:
            driver.mamba_split = None
        manager = driver.manager
        request = make_request("decode", list(prompt), 16)
        computed, num_computed = computed_blocks(manager, request)
        num_new = driver._chunk(request, request.num_tokens - num_computed, 0)
        step(manager, request, num_new, num_computed, computed)
        request.num_computed_tokens += num_computed
        while request.num_computed_tokens < request.num_tokens:
            left = request.num_tokens - request.num_computed_tokens
            step(manager, request, driver._chunk(request, left, 0))
        request.append_output_token_ids(1)
        manager.take_events()
        return manager, request

    def call(manager, request) -> None:
        for token in range(16):
            step(manager, request, 1)
            request.append_output_token_ids(token)

    return fresh, call


def build(case: str):
    events = not case.endswith(", events off")
    name = case.removesuffix(", events off")
    if name.startswith("partial x"):
        return partial_alone(int(name.removeprefix("partial x")), events)
    if name.startswith("register "):
        shape = tuple(map(int, name.removeprefix("register ").split("x")))
        return registration(shape, events)
    if name.startswith("decode "):
        context = int(name.removeprefix("decode ").split("k")[0]) * 1024
        return decode_one_block(context, aligned="unaligned" not in name)
    return sibling_tails()


def wire_bytes(events: list) -> int:
    import msgspec
    from vllm.distributed.kv_events import KVEventBatch

    if not events:
        return 0
    return len(msgspec.msgpack.encode(KVEventBatch(ts=0.0, events=events)))


def lines(fresh, call) -> dict:
    call(*fresh())  # warm-up: one-time imports and caches are not counted
    counts, emitted, sizes = [], [], []
    for _ in range(2):
        args = fresh()
        counts.append(stream_growth.traced_lines(call, *args))
        events = args[0].take_events()
        emitted.append(len(events))
        sizes.append(wire_bytes(events))
    return {"lines": counts, "events": emitted, "bytes": sizes}


def cpu_time(fresh, call, repeat: int) -> dict:
    prepared = [fresh() for _ in range(repeat)]
    gc.collect()
    started = time.process_time()
    for args in prepared:
        call(*args)
    return {"us": (time.process_time() - started) / repeat * 1e6}


def child() -> int:
    benchlib.as_the_engine_runs()
    built: dict = {}
    for request, reply in benchlib.serve_requests():
        try:
            case = request["case"]
            if case not in built:
                built[case] = build(case)
            if "repeat" in request:
                reply(cpu_time(*built[case], request["repeat"]))
            else:
                reply(lines(*built[case]))
        except Exception as exc:  # reported to the parent, which stops
            reply({"error": f"{type(exc).__name__}: {exc}"})
    return 0


# --------------------------------------------------------------------------
# Parent
# --------------------------------------------------------------------------


def run(args) -> dict:
    trees = benchlib.parse_trees(args.tree, ("default",))
    cases = args.case or list(CASES)
    before = benchlib.machine()
    print(benchlib.machine_line(before), flush=True)
    for label, tree in trees.items():
        print(f"tree {label}: {tree}", flush=True)
    labels = list(trees)
    counted = {label: {} for label in labels}
    times: dict[str, dict[str, list[float]]] = {
        label: {case: [] for case in cases} for label in labels
    }
    with benchlib.children(SCRIPT, trees, "partial-entry-cost-") as children:
        for case in cases:
            for label in labels:
                counted[label][case] = children[label].ask({"case": case})
        for index in range(args.rounds):
            order = labels[index % len(labels) :] + labels[: index % len(labels)]
            for case in cases:
                for label in order:
                    reply = children[label].ask({"case": case, "repeat": args.repeat})
                    times[label][case].append(reply["us"])
            print(f"round {index + 1}/{args.rounds} done", flush=True)
    return {
        "machine_before": before,
        "machine_after": benchlib.machine(),
        "trees": {label: str(tree) for label, tree in trees.items()},
        "rounds": args.rounds,
        "repeat": args.repeat,
        "lines": counted,
        "us": times,
    }


def report(result: dict) -> None:
    labels = list(result["trees"])
    base = labels[0]
    print()
    print(benchlib.machine_line(result["machine_after"]))
    print(
        f"{result['rounds']} interleaved rounds of {result['repeat']} calls per "
        f"case and tree; ratios to {base}"
    )
    print()
    print(
        "| case | tree | events | bytes | bytes ratio | lines (twice) | lines ratio "
        "| us per call (median) | time ratio, median (min-max) |"
    )
    print("| --- | --- |" + " ---: |" * 7)
    for case in result["lines"][base]:
        base_lines = result["lines"][base][case]["lines"][0]
        base_bytes = result["lines"][base][case]["bytes"][0]
        base_us = result["us"][base][case]
        for label in labels:
            counted = result["lines"][label][case]
            us = result["us"][label][case]
            ratios = [mine / theirs for mine, theirs in zip(us, base_us, strict=True)]
            cells = [
                case,
                label,
                str(counted["events"][0]),
                f"{counted['bytes'][0]:,}",
                f"{counted['bytes'][0] / base_bytes:.2f}" if base_bytes else "-",
                " / ".join(f"{count:,}" for count in counted["lines"]),
                f"{counted['lines'][0] / base_lines:.2f}",
                f"{benchlib.median(us):,.1f}",
                "-" if label == base else benchlib.spread(ratios),
            ]
            print("| " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/partial_entry_cost.py")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    benchlib.add_tree_argument(parser)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--repeat", type=int, default=50, help="timed calls per case, tree, round"
    )
    parser.add_argument("--case", action="append", choices=CASES)
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    return benchlib.run_main(parser.parse_args(argv), child, run, report)


if __name__ == "__main__":
    sys.exit(main())
