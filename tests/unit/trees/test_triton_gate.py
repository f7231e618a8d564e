"""vLLM 0.34's Triton gate: found in a tree, and bypassed by the plugin alone."""

import textwrap

from support.trees import UPSTREAM_TREE, write_tree

from harness.suites.upstream import run_upstream
from harness.trees import triton_gate

GATE = """\
        if cls.get_cpu_architecture() == CpuArchEnum.X86 and not HAS_TRITON:
            raise RuntimeError("vLLM on x86 CPUs requires Triton (triton-cpu).")
"""
# The shape of 0.34.0's vllm/platforms/cpu.py around the gate.
CPU_PY = """\
from vllm.triton_utils import HAS_TRITON as _UNUSED


class CpuArchEnum:
    X86 = "x86"


class CpuPlatform:
    @classmethod
    def get_cpu_architecture(cls):
        return CpuArchEnum.X86

    @classmethod
    def check_and_update_config(cls, vllm_config) -> None:
        from vllm.triton_utils import HAS_TRITON

        if cls.get_cpu_architecture() == CpuArchEnum.X86 and not HAS_TRITON:
            raise RuntimeError("vLLM on x86 CPUs requires Triton (triton-cpu).")
        vllm_config["checked"] = HAS_TRITON
        if not vllm_config:
            raise RuntimeError("an empty config")
"""
GATED = {
    "vllm/__init__.py": "",
    "vllm/triton_utils.py": "HAS_TRITON = False\n",
    "vllm/platforms/__init__.py": "",
    "vllm/platforms/cpu.py": CPU_PY,
}
# A test that builds a "config" through the gated method.
TEST_CONFIG = textwrap.dedent(
    """\
    from vllm.platforms.cpu import CpuPlatform


    def test_config_is_checked():
        config = {"model": "m"}
        CpuPlatform.check_and_update_config(config)
        assert config == {"model": "m", "checked": False}
    """
)


def test_a_tree_with_the_gate_is_bypassed_and_one_without_is_not(tmp_path):
    assert triton_gate.state(write_tree(tmp_path / "gated", GATED)) == "bypassed"
    assert triton_gate.state(write_tree(tmp_path / "plain", UPSTREAM_TREE)) == "none"
    ungated = CPU_PY.replace(GATE, "")
    assert ungated != CPU_PY
    other = write_tree(tmp_path / "other", {**GATED, "vllm/platforms/cpu.py": ungated})
    assert triton_gate.state(other) == "none"


def test_two_gates_are_kept_and_said(tmp_path):
    twice = CPU_PY.replace(
        '        vllm_config["checked"]',
        '        if not HAS_TRITON:\n            raise RuntimeError("Triton again")\n'
        '        vllm_config["checked"]',
    )
    tree = write_tree(tmp_path / "t", {**GATED, "vllm/platforms/cpu.py": twice})
    assert triton_gate.state(tree) == "kept (2 Triton gates in check_and_update_config)"


def test_the_plugin_removes_the_gate_and_nothing_else(tmp_path):
    tree = write_tree(tmp_path / "tree", {**GATED, "tests/test_config.py": TEST_CONFIG})
    assert run_upstream(tree, ("tests",), "0", "patched") == {
        "tests/test_config.py::test_config_is_checked": "passed"
    }
    # The rest of the method runs as written: its own other raise still fires.
    empty = TEST_CONFIG.replace('{"model": "m"}', "{}").replace(
        "check_and_update_config(config)",
        "check_and_update_config(config)\n    assert False, 'not reached'",
    )
    empty = empty.replace("def test_config_is_checked", "def test_empty_is_refused")
    tree = write_tree(tmp_path / "empty", {**GATED, "tests/test_config.py": empty})
    outcomes = run_upstream(tree, ("tests",), "0", "patched")
    assert outcomes == {"tests/test_config.py::test_empty_is_refused": "failed"}


def test_without_the_plugin_the_gate_refuses_the_config(tmp_path, monkeypatch):
    """The control: the tree's own gate is what the test above passes."""
    monkeypatch.setattr(triton_gate, "state", lambda tree: triton_gate.ABSENT)
    tree = write_tree(tmp_path / "tree", {**GATED, "tests/test_config.py": TEST_CONFIG})
    assert run_upstream(tree, ("tests",), "0", "pristine") == {
        "tests/test_config.py::test_config_is_checked": "failed"
    }
