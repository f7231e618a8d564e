"""The environment of a process that runs Python inside a vLLM tree.

Every such process (upstream tests, workload workers, the engine, the
benchmarks' children) imports vLLM from the tree first on PYTHONPATH, on the
CPU platform, and never reaches for a model hub: tests that need one fail at
once on both trees instead of retrying the network for minutes. The one
model vLLM's scheduler tests build their configuration from
(``facebook/opt-125m``, tests/v1/core/utils.py's ``create_scheduler``) is
given from `HUB_STANDIN`: its public config.json alone, no weights and no
tokenizer, so that a scheduler test runs offline as it does upstream.
"""

import os
from pathlib import Path

from harness import cache
from harness.errors import CacheError
from harness.trees.cpu_platform import CPU_PLATFORM_VARIABLE

# The environment of every upstream test run, pristine and patched alike; it
# is part of the key of cached pristine outcomes.
UPSTREAM_ENV = {"VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1"}
# What a command shown to a reviewer sets: not HF_HUB_OFFLINE, which only the
# harness's hub stand-in (HUB_STANDIN) satisfies; a reviewer's run fetches
# the model configs the tests read.
SHOWN_ENV = " ".join(
    f"{key}={value}" for key, value in UPSTREAM_ENV.items() if key != "HF_HUB_OFFLINE"
)

# A model hub cache (huggingface_hub's layout) holding the config.json of each
# model vLLM's CPU-runnable core tests name, and nothing else; read only.
HUB_STANDIN = Path(__file__).resolve().parent / "hub"
HUB_MODELS = tuple(
    sorted(
        path.name.removeprefix("models--").replace("--", "/")
        for path in HUB_STANDIN.glob("models--*")
    )
)

# What every process that produces a KV-event stream for comparison runs
# with (workload workers, engine sessions, the benchmarks' children): the
# streams of two trees are compared across processes, and a process's hash
# seed shows in them. Pristine vLLM emits a block's secondary-hash removals
# in set order, which follows PYTHONHASHSEED; and vLLM derives NONE_HASH, the
# root of every block hash, from PYTHONHASHSEED when it is set (tox sets a
# random one per run). Pinned, the order and the hashes are the same in
# every run and every process.
STREAM_ENV = {"PYTHONHASHSEED": "0"}


def harness_root() -> Path:
    """The directory that holds the harness package, for PYTHONPATH."""
    return Path(__file__).resolve().parents[2]


def tree_env(tree: Path | None, with_harness: bool = True, **extra: str) -> dict:
    """os.environ plus what runs Python in a vLLM tree: the tree first on
    PYTHONPATH, then the harness unless ``with_harness`` is false, the CPU
    platform and no model hub but `HUB_STANDIN`. With ``tree`` None, the
    installed vllm (an engine) is used on whatever platform it was built
    for."""
    paths = [str(tree)] if tree is not None else []
    if with_harness:
        paths.append(str(harness_root()))
    env = (
        {**UPSTREAM_ENV, "HF_HUB_CACHE": str(HUB_STANDIN)}
        if tree is not None
        else {"HF_HUB_OFFLINE": "1"}
    )
    if tree is not None and not selects_cpu_from_env(tree):
        env = {**env, CPU_PLATFORM_VARIABLE: "1"}
    if tree is not None:
        env = {**_bytecode_elsewhere(), **env}
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), **env, **extra}


def _bytecode_elsewhere() -> dict:
    """The tree's bytecode in the harness cache's own folder for it, never
    in the tree (a cached tree is copied into forks and scratch repositories
    as released); none written where the cache cannot be named. A user's own
    PYTHONPYCACHEPREFIX is kept."""
    if "PYTHONPYCACHEPREFIX" in os.environ:
        return {}
    try:
        return {"PYTHONPYCACHEPREFIX": str(cache.pycache())}
    except CacheError:
        return {"PYTHONDONTWRITEBYTECODE": "1"}


def selects_cpu_from_env(tree: Path) -> bool:
    """Whether the tree's vLLM takes its CPU platform from
    VLLM_TARGET_DEVICE (0.28 on); before, the harness's platform plugin
    selects it (harness.trees.cpu_platform). A tree without the module is
    left to itself."""
    platforms = tree / "vllm" / "platforms" / "__init__.py"
    try:
        return "VLLM_TARGET_DEVICE" in platforms.read_text(encoding="utf-8")
    except OSError:
        return True
