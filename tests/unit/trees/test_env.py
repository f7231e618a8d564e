"""The environment of a process inside a vLLM tree: the CPU platform chosen
the way the tree's own release chooses it, or by the harness's plugin."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.trees import cpu_platform
from harness.trees.env import HUB_MODELS, selects_cpu_from_env, tree_env

# cpu_platform_plugin() as vLLM 0.27 has it (the installed version decides)
# and as 0.28 on (VLLM_TARGET_DEVICE decides first).
BEFORE_028 = """
def cpu_platform_plugin() -> str | None:
    is_cpu = vllm_version_matches_substr("cpu")
"""
FROM_028 = """
def cpu_platform_plugin() -> str | None:
    is_cpu = envs.VLLM_TARGET_DEVICE == "cpu"
"""


def tree(root: Path, platforms: str | None) -> Path:
    if platforms is not None:
        module = root / "vllm" / "platforms" / "__init__.py"
        module.parent.mkdir(parents=True)
        module.write_text(platforms)
    return root


@pytest.mark.parametrize(
    ("platforms", "plugin"),
    [(BEFORE_028, True), (FROM_028, False), (None, False)],
    ids=["before-0.28", "0.28-on", "no-vllm"],
)
def test_the_plugin_is_switched_on_only_for_trees_that_ignore_the_device(
    tmp_path, monkeypatch, platforms, plugin
):
    monkeypatch.delenv(cpu_platform.CPU_PLATFORM_VARIABLE, raising=False)
    root = tree(tmp_path, platforms)
    assert selects_cpu_from_env(root) is not plugin
    env = tree_env(root)
    assert env["VLLM_TARGET_DEVICE"] == "cpu"
    assert (env.get(cpu_platform.CPU_PLATFORM_VARIABLE) == "1") is plugin


def test_an_installed_engine_is_left_to_its_own_platform(monkeypatch):
    monkeypatch.delenv(cpu_platform.CPU_PLATFORM_VARIABLE, raising=False)
    monkeypatch.delenv("VLLM_TARGET_DEVICE", raising=False)
    env = tree_env(None)
    assert cpu_platform.CPU_PLATFORM_VARIABLE not in env
    assert "VLLM_TARGET_DEVICE" not in env


@pytest.mark.parametrize(
    ("value", "platform"),
    [("1", "vllm.platforms.cpu.CpuPlatform"), (None, None), ("0", None)],
)
def test_the_plugin_declines_unless_switched_on(monkeypatch, value, platform):
    if value is None:
        monkeypatch.delenv(cpu_platform.CPU_PLATFORM_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(cpu_platform.CPU_PLATFORM_VARIABLE, value)
    assert cpu_platform.cpu_platform() == platform


def test_a_tree_runs_offline_with_the_hub_standin_of_the_scheduler_tests_model(
    tmp_path,
):
    """vLLM's scheduler tests build their config from facebook/opt-125m; the
    stand-in gives its config.json, in the hub's layout, and nothing else."""
    env = tree_env(tree(tmp_path, FROM_028))
    assert env["HF_HUB_OFFLINE"] == "1"
    model = Path(env["HF_HUB_CACHE"]) / "models--facebook--opt-125m"
    revision = (model / "refs" / "main").read_text()
    snapshot = model / "snapshots" / revision
    assert [path.name for path in snapshot.iterdir()] == ["config.json"]
    assert json.loads((snapshot / "config.json").read_text())["model_type"] == "opt"
    assert HUB_MODELS == ("facebook/opt-125m",)
    assert "HF_HUB_CACHE" not in tree_env(None)


def test_python_in_a_tree_writes_no_bytecode_into_it(tmp_path, monkeypatch, cache):
    """A cached tree is copied into forks as released: the bytecode of a run
    inside it goes to the harness cache's own folder."""
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    root = tree(tmp_path / "tree", FROM_028)
    (root / "vllm" / "__init__.py").write_text("")
    (root / "vllm" / "platforms" / "__init__.py").write_text("X = 1\n")
    subprocess.run(
        [sys.executable, "-c", "import vllm.platforms"],
        env=tree_env(root, with_harness=False),
        check=True,
    )
    assert not any(root.rglob("*.pyc"))
    assert any((cache / "pycache").rglob("*.pyc"))
