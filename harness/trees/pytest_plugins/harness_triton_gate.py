"""A pytest plugin that lets vLLM's CPU platform start without triton-cpu.

From 0.34 on, ``CpuPlatform.check_and_update_config`` refuses every
``VllmConfig`` on an x86 CPU when Triton is not importable ("vLLM on x86 CPUs
requires Triton (triton-cpu)"), and triton-cpu is a release download on no
package index. Every upstream test that builds a scheduler builds such a
config, so on a CPU machine those tests fail on the pristine and the patched
tree alike, for a reason that is not the series'.

Loaded with ``-p harness_triton_gate`` (its directory on PYTHONPATH; the
harness loads it on both trees or on neither), it removes that one ``if``
statement from the method, as vLLM wrote it, when ``vllm.platforms.cpu`` is
imported: the method is compiled again from its own source minus that
statement, at its own line numbers, in its own module's globals. Nothing
else changes: HAS_TRITON keeps its value, and every other line of the method
runs as released. A tree whose method has no such statement, or more than
one, is refused at import, so a changed gate is never bypassed blindly.

Standard library only; the harness imports ``gate_statement`` from here too.
"""

import ast
import importlib.abc
import importlib.machinery
import inspect
import sys

MODULE = "vllm.platforms.cpu"
CLASS = "CpuPlatform"
METHOD = "check_and_update_config"


def gate_statement(function: ast.FunctionDef) -> ast.If | None:
    """The one top-level ``if ...HAS_TRITON...: raise RuntimeError(...)`` of
    ``function``'s body, or None; a ValueError where there are several."""
    gates = [
        node
        for node in function.body
        if isinstance(node, ast.If)
        and not node.orelse
        and any(
            isinstance(name, ast.Name) and name.id == "HAS_TRITON"
            for name in ast.walk(node.test)
        )
        and len(node.body) == 1
        and isinstance(node.body[0], ast.Raise)
        and "Triton" in ast.unparse(node.body[0])
    ]
    if len(gates) > 1:
        raise ValueError(f"{len(gates)} Triton gates in {function.name}")
    return gates[0] if gates else None


def find_method(module_tree: ast.Module) -> ast.FunctionDef | None:
    """``CpuPlatform.check_and_update_config`` in a parsed ``cpu.py``."""
    for node in module_tree.body:
        if isinstance(node, ast.ClassDef) and node.name == CLASS:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == METHOD:
                    return item
    return None


def bypass(module) -> None:
    """Replace the class's method by its own source without the gate."""
    path = inspect.getsourcefile(module)
    with open(path, encoding="utf-8") as source:
        module_tree = ast.parse(source.read(), path)
    method = find_method(module_tree)
    gate = gate_statement(method) if method is not None else None
    if gate is None:
        raise RuntimeError(
            f"harness_triton_gate: no Triton gate in {CLASS}.{METHOD} of {path}; "
            "load this plugin only on a tree that has one"
        )
    method.body = [node for node in method.body if node is not gate]
    code = compile(ast.Module(body=[method], type_ignores=[]), path, "exec")
    namespace: dict = {}
    exec(code, vars(module), namespace)
    setattr(getattr(module, CLASS), METHOD, namespace[METHOD])


class _Finder(importlib.abc.MetaPathFinder):
    """Bypasses the gate right after ``vllm.platforms.cpu`` is executed."""

    def find_spec(self, fullname, path, target=None):
        if fullname != MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            bypass(module)

        spec.loader.exec_module = exec_module
        return spec


if MODULE in sys.modules:
    bypass(sys.modules[MODULE])
else:
    sys.meta_path.insert(0, _Finder())
