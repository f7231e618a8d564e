"""Single vLLM calls on the scheduler thread, set up in fresh pools, and what
each costs: the Python lines it executes, the events it emits and their bytes
on the wire. Deterministic, so a tree's figures can be quoted as measured.

`benchmarks/partial_entry_cost.py` times these cases side by side; the export
quotes their lines and bytes for the tree it exports, against the pristine
tree (harness.workloads.call_count counts them).

The cases:

- ``partial xR`` (R = 4, 16, 48, 128): ``cache_partial_block`` alone, hash
  block 16, cache block 16*R, the first cache block cached, the entry at the
  second block's last hash boundary (where the default tier reports the most
  boundaries);
- ``register HxBxT``: one prompt's registration (its full blocks, then its
  tail as a partial entry), hash block H, cache block B, T tokens;
- ``prefill HxBxT``: a hybrid KVCacheManager (full attention and Mamba in
  align mode, both block B, hash block H) prefilling one T-token prompt in
  the chunks vLLM's scheduler splits it into, its cache empty;
- ``masked N/K``: one ``cache_full_blocks`` call of N blocks (block 16, hash
  block 16, the request's first call) whose mask keeps every K-th block, as
  a sliding-window or Mamba group's alignment mask does; ``masked N tail
  W``: the same keeping only the last W blocks (a sliding window's tail);
- ``8 sibling tails``: eight requests with the same 8,000-token prompt (as
  ``n=8`` sampling has), hash block 4, cache block 4096, the shared first
  block cached; the eight ``cache_partial_block`` calls of their tails, each
  in a block of its own;
- ``decode Nk`` (N = 1, 4, 16, 64): a hybrid KVCacheManager (full attention
  and Mamba in align mode, both block 16, hash block 16), an N*1024-token
  prompt prefilled in chunks split as vLLM's scheduler splits them for Mamba
  (`harness.workloads.manager_driver`), then the 16 decode steps
  (``allocate_slots`` of one token each) that fill the next cache block;
- ``decode 16k, unaligned prefill``: the same with the prompt prefilled in one
  chunk that ends inside a block, so no Mamba state is cached before the
  decoded block (what a dropped or evicted checkpoint leaves);
- any case but a decode with ``, events off`` (``enable_kv_cache_events=False``);
- ``workload CONFIG``: 300 seeded operations of a KVCacheManager workload of
  `harness.workloads.drivers` (the engine's call pattern, the scheduler's
  Mamba split, hash block 16), then one that evicts everything; each
  operation's events make one batch, as a scheduler step's do. Its lines
  are not counted: the driver's own would dilute them.

vLLM is imported only inside the functions: they run inside the tree under
test.
"""

from __future__ import annotations

PARTIAL_RATIOS = (4, 16, 48, 128)
# (hash_block_size, block_size, prompt tokens)
REGISTRATIONS = ((128, 1536, 1800), (16, 1536, 4000), (16, 2048, 4000))
PREFILLS = ((16, 1536, 4000), (16, 2048, 4000))
DECODE_CONTEXTS = (1, 4, 16, 64)
MASKED = ("masked 64/2", "masked 64/4", "masked 64 tail 4")
EVENTS_OFF = ", events off"
WORKLOAD = "workload "
# Seeded operations of a workload case, then one that evicts everything.
WORKLOAD_OPS = 300
# What a workload case's title says of its config (harness.workloads.drivers).
WORKLOAD_LAYOUTS = {
    "manager-mamba": "full attention and Mamba (align mode), block 64",
    "manager-swa": "full attention (block 256) and a sliding window (block 64)",
}
# What the conformance suite counts on both trees (the export quotes the
# cases of the calls a change alters: harness.workloads.call_cases).
EXPORTED = (
    "partial x16",
    "partial x128",
    "register 16x2048x4000",
    "8 sibling tails",
    "decode 16k",
    "decode 16k, unaligned prefill",
    "partial x128" + EVENTS_OFF,
    "register 16x2048x4000" + EVENTS_OFF,
    *(WORKLOAD + config for config in WORKLOAD_LAYOUTS),
)


class Unsupported(Exception):
    """The tree has no such call (a release that registers no partial entry)."""


def _pool(num_blocks: int, hash_block_size: int, events: bool):
    from vllm.v1.core.block_pool import BlockPool

    if not hasattr(BlockPool, "cache_partial_block"):
        raise Unsupported("the tree's BlockPool registers no partial entry")
    return BlockPool(
        num_gpu_blocks=num_blocks,
        enable_caching=True,
        hash_block_size=hash_block_size,
        enable_kv_cache_events=events,
    )


def _request(request_id: str, tokens: int, hash_block_size: int):
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import init_none_hash

    from harness.workloads.requests import make_request

    init_none_hash(sha256)
    return make_request(request_id, list(range(tokens)), hash_block_size)


def partial_alone(ratio: int, events: bool = True):
    """``(fresh, call)``: a pool with the first cache block cached, and the
    second block's entry at its last hash boundary."""
    hash_block_size, block_size = 16, 16 * ratio
    request = _request("prompt", 2 * block_size, hash_block_size)

    def fresh():
        pool = _pool(3, hash_block_size, events)
        blocks = pool.get_new_blocks(2)
        pool.cache_full_blocks(request, blocks, 0, 1, block_size, 0)
        pool.take_events()
        return pool, blocks[1]

    def call(pool, block) -> None:
        pool.cache_partial_block(
            request, block, 2 * block_size - hash_block_size, 0, block_size
        )

    return fresh, call


def prompt_registration(
    hash_block_size: int, block_size: int, tokens: int, events: bool = True
):
    """``(fresh, register, evict)`` for one prompt of ``tokens`` tokens:
    ``fresh()`` is a new pool and the prompt's blocks, ``register(pool,
    blocks)`` caches them as the scheduler caches a prompt (its full blocks,
    then its tail as a partial entry at the last hash boundary before the
    prompt's end), ``evict(pool, blocks)`` frees and evicts them."""
    request = _request("prompt", tokens, hash_block_size)
    tail = (tokens - 1) // hash_block_size * hash_block_size
    num_blocks = -(-tokens // block_size)

    def fresh():
        pool = _pool(num_blocks + 1, hash_block_size, events)
        return pool, pool.get_new_blocks(num_blocks)

    def register(pool, blocks) -> None:
        pool.cache_full_blocks(request, blocks, 0, tokens // block_size, block_size, 0)
        pool.cache_partial_block(
            request, blocks[tail // block_size], tail, 0, block_size
        )

    def evict(pool, blocks) -> None:
        pool.free_blocks(blocks[::-1])
        pool.evict_blocks({block.block_id for block in blocks})

    return fresh, register, evict


def masked_blocks(name: str, events: bool = True):
    """``(fresh, call)``: one ``cache_full_blocks`` call under the mask of a
    ``masked N/K`` or ``masked N tail W`` case."""
    size, _, tail = name.removeprefix("masked ").partition(" tail ")
    count, _, every = size.partition("/")
    n = int(count)
    mask = [i >= n - int(tail) if tail else (i + 1) % int(every) == 0 for i in range(n)]
    block_size = 16
    request = _request("prompt", len(mask) * block_size, block_size)

    def fresh():
        pool = _pool(len(mask) + 1, block_size, events)
        return pool, pool.get_new_blocks(len(mask))

    def call(pool, blocks) -> None:
        pool.cache_full_blocks(
            request, blocks, 0, len(mask), block_size, 0, block_mask=mask
        )

    return fresh, call


def sibling_tails(count: int = 8, events: bool = True):
    """``(fresh, call)``: the tails of ``count`` requests with one prompt."""
    hash_block_size, block_size, tokens = 4, 4096, 8000
    requests = [_request(f"sibling-{i}", tokens, hash_block_size) for i in range(count)]
    tail = (tokens - 1) // hash_block_size * hash_block_size

    def fresh():
        pool = _pool(count + 2, hash_block_size, events)
        shared = pool.get_new_blocks(1)
        pool.cache_full_blocks(requests[0], shared, 0, 1, block_size, 0)
        pool.take_events()
        return pool, pool.get_new_blocks(count)

    def call(pool, blocks) -> None:
        for request, block in zip(requests, blocks, strict=True):
            pool.cache_partial_block(request, block, tail, 0, block_size)

    return fresh, call


def _stepper():
    """``step(manager, request, num_new, *hit)``: one scheduler step of
    ``num_new`` tokens for ``request``."""
    from harness.workloads.compat import (
        release_block_copies,
        take_boundary_state_offloads,
    )

    def step(manager, request, num_new: int, *hit) -> None:
        manager.new_step_starts()
        assert manager.allocate_slots(request, num_new, *hit) is not None
        request.num_computed_tokens += num_new
        release_block_copies(manager)
        manager.take_new_block_ids()
        take_boundary_state_offloads(manager)

    return step


def _prefill(step, driver, request) -> None:
    """``request``'s prompt, in the chunks vLLM's scheduler splits it into."""
    from harness.workloads.compat import computed_blocks

    manager = driver.manager
    computed, num_computed = computed_blocks(manager, request)
    num_new = driver._chunk(request, request.num_tokens - num_computed, 0)
    step(manager, request, num_new, num_computed, computed)
    request.num_computed_tokens += num_computed
    while request.num_computed_tokens < request.num_tokens:
        left = request.num_tokens - request.num_computed_tokens
        step(manager, request, driver._chunk(request, left, 0))


def _hybrid_prompt(hash_block_size: int, block_size: int, tokens: int, room: int):
    """``(driver, request)`` factory: a manager with a full attention and a
    Mamba group (align mode, both ``block_size``) sized for ``room`` tokens,
    and a seeded prompt of ``tokens`` tokens, not yet scheduled."""
    import random

    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import init_none_hash

    from harness.workloads.manager_driver import ManagerDriver
    from harness.workloads.requests import VOCAB, make_request

    init_none_hash(sha256)
    rng = random.Random(0)
    prompt = [rng.randrange(VOCAB) for _ in range(tokens)]

    def fresh():
        driver = ManagerDriver(
            random.Random(0),
            hash_block_size,
            [("full_attention", block_size), ("mamba", block_size)],
            num_blocks=room // block_size + 64,
            token_budget=room,
        )
        return driver, make_request("prompt", list(prompt), hash_block_size)

    return fresh


def hybrid_prefill(hash_block_size: int, block_size: int, tokens: int):
    """``(fresh, call)``: a hybrid manager, and one prompt's prefill."""
    new_prompt = _hybrid_prompt(hash_block_size, block_size, tokens, tokens)
    step = _stepper()

    def fresh():
        driver, request = new_prompt()
        return driver.manager, driver, request

    def call(manager, driver, request) -> None:
        _prefill(step, driver, request)

    return fresh, call


def decode_one_block(context: int, aligned: bool):
    """``(fresh, call)``: a hybrid manager after a ``context``-token prompt,
    and the 16 decode steps that fill the next cache block."""
    new_prompt = _hybrid_prompt(16, 16, context - 8, context)
    step = _stepper()

    def fresh():
        driver, request = new_prompt()
        if not aligned:
            driver.mamba_split = None
        _prefill(step, driver, request)
        request.append_output_token_ids(1)
        driver.manager.take_events()
        return driver.manager, request

    def call(manager, request) -> None:
        for token in range(16):
            step(manager, request, 1)
            request.append_output_token_ids(token)

    return fresh, call


class Steps:
    """Each step's events, taken from the pool as the scheduler takes them."""

    def __init__(self, pool):
        self.pool, self.batches = pool, []

    def step(self) -> None:
        events = self.pool.take_events()
        if events:
            self.batches.append(events)

    def take_batches(self) -> list[list]:
        batches, self.batches = self.batches, []
        return batches


def seeded_workload(config: str, seed: int = 0, ops: int = WORKLOAD_OPS):
    """``(fresh, call)``: a workload's driver, and its seeded operations."""
    from harness.workloads.drivers import evict_everything
    from harness.workloads.workloads import build as build_workload

    def fresh():
        driver, _ = build_workload(config, seed)
        return Steps(driver.pool), driver

    def call(steps, driver) -> None:
        for _ in range(ops):
            driver.step()
            steps.step()
        evict_everything(driver)
        steps.step()

    return fresh, call


def build(case: str):
    """``(fresh, call)`` for one case: ``call(*fresh())`` makes the calls."""
    events = not case.endswith(EVENTS_OFF)
    name = case.removesuffix(EVENTS_OFF)
    if name.startswith("partial x"):
        return partial_alone(int(name.removeprefix("partial x")), events)
    if name.startswith("register "):
        shape = tuple(map(int, name.removeprefix("register ").split("x")))
        fresh, register, _ = prompt_registration(*shape, events=events)
        return fresh, register
    if name.startswith("prefill ") and events:
        return hybrid_prefill(*map(int, name.removeprefix("prefill ").split("x")))
    if name.startswith("decode ") and events:
        context = int(name.removeprefix("decode ").split("k")[0]) * 1024
        return decode_one_block(context, "unaligned" not in name)
    if name == "8 sibling tails":
        return sibling_tails(events=events)
    if name.startswith("masked "):
        return masked_blocks(name, events)
    if name.removeprefix(WORKLOAD) in WORKLOAD_LAYOUTS and events:
        return seeded_workload(name.removeprefix(WORKLOAD))
    raise ValueError(f"no case {case!r}")


def title(case: str) -> str:
    """What the case calls, for a reader who does not know its name."""
    events = case.endswith(EVENTS_OFF)
    name = case.removesuffix(EVENTS_OFF)
    if name.startswith("partial x"):
        ratio = int(name.removeprefix("partial x"))
        said = f"`cache_partial_block()`, hash block 16, block {16 * ratio}"
    elif name.startswith("register "):
        hash_block, block, tokens = name.removeprefix("register ").split("x")
        said = (
            f"a {int(tokens):,}-token prompt's `cache_full_blocks()` and "
            f"`cache_partial_block()`, hash block {hash_block}, block {block}"
        )
    elif name.startswith("prefill "):
        hash_block, block, tokens = name.removeprefix("prefill ").split("x")
        said = (
            f"a {int(tokens):,}-token prompt's prefill through `KVCacheManager`, "
            f"full attention and Mamba (align mode), hash block {hash_block}, "
            f"block {block}"
        )
    elif name == "8 sibling tails":
        said = (
            "the `cache_partial_block()` of 8 tails of one 8,000-token prompt, "
            "hash block 4, block 4096"
        )
    elif name.startswith("masked "):
        said = f"one `cache_full_blocks()` under a block mask ({name}), block 16"
    elif name.startswith(WORKLOAD):
        config = name.removeprefix(WORKLOAD)
        said = (
            f"{WORKLOAD_OPS} seeded scheduler steps through `KVCacheManager`, "
            f"{WORKLOAD_LAYOUTS[config]}, hash block 16, then evicting "
            "everything; each step's events one batch"
        )
    else:
        context = name.removeprefix("decode ").split("k")[0]
        said = (
            f"16 decode steps after a {context}k-token prompt, full attention "
            "and Mamba (align mode), block 16"
        )
        if "unaligned" in name:
            said += ", the prompt prefilled in one chunk ending inside a block"
    return said + (", KV events off" if events else "")
