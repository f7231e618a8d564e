"""Whether a tree's upstream tests run with vLLM's Triton gate bypassed.

vLLM 0.34's CPU platform refuses every ``VllmConfig`` on an x86 CPU where
vLLM finds no working Triton (triton-cpu, which no package index carries;
harness/trees/pytest_plugins/harness_triton_gate.py says what the bypass
does). The harness loads that plugin on both trees of a verdict wherever the
tree has the gate: where Triton works, or the machine is not x86, the gate
never fires and removing it changes nothing. The state is part of every
verdict (its provenance) and of the key of cached pristine outcomes, so that
a row says what its tests ran under.
"""

import ast
import os
from pathlib import Path

from harness.trees.pytest_plugins import harness_triton_gate

PLUGIN_DIR = Path(harness_triton_gate.__file__).resolve().parent
PLUGIN = "harness_triton_gate"

BYPASSED = "bypassed"
# The tree has no gate: nothing to bypass (every release before 0.34).
ABSENT = "none"


def state(tree: Path) -> str:
    """``bypassed`` where the tree's CPU platform has the gate, else ``none``
    (or why a gate it has is left as it is)."""
    source = tree / "vllm" / "platforms" / "cpu.py"
    try:
        module = ast.parse(source.read_bytes(), str(source))
    except (OSError, SyntaxError, ValueError):
        return ABSENT
    method = harness_triton_gate.find_method(module)
    try:
        gate = method is not None and harness_triton_gate.gate_statement(method)
    except ValueError as exc:
        return f"kept ({exc})"
    return BYPASSED if gate else ABSENT


def pytest_arguments(tree_state: str) -> list[str]:
    """What loads the plugin on a pytest command line, where it is bypassed."""
    return ["-p", PLUGIN] if tree_state == BYPASSED else []


def with_plugin(env: dict[str, str], tree_state: str) -> dict[str, str]:
    """``env`` with the plugin's directory last on PYTHONPATH, where bypassed."""
    if tree_state != BYPASSED:
        return env
    paths = [part for part in env.get("PYTHONPATH", "").split(os.pathsep) if part]
    return {**env, "PYTHONPATH": os.pathsep.join([*paths, str(PLUGIN_DIR)])}
