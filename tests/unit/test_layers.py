"""The harness's shape: layers that import only downward, and no cycles.

Each module belongs to a layer by where it lives; a module may import its
own layer and the layers below it, never one above. The imports read here
are every import statement of the module, those inside functions included.
"""

import ast

import pytest
from support import REPO_ROOT

PACKAGE = REPO_ROOT / "harness"
# Lowest first. A module's layer is that of its top-level name under harness.
LAYERS = (
    {"__init__", "errors", "log", "checkout", "processes", "scratch", "reading"},
    {"contract", "pins", "tiers", "targets", "cache", "verdict"},
    {"trees"},
    {"series"},
    {"installed"},
    {"submission"},
    {"suites"},
    {"workloads"},
    {"routers"},
    {"engine"},
    {"verbs"},
    {"cli"},
    {"__main__"},
)
# Imported only inside functions of the modules that run in a vLLM tree or
# engine, or that need an optional dependency.
LAZY_ONLY = ("vllm", "torch", "zmq", "dynamo", "transformers", "tokenizers")


def module_name(path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else "__init__"
    return next(index for index, names in enumerate(LAYERS) if top in names)


def imports(module: str) -> list[tuple[str, int, bool]]:
    """(imported module, line, at module level) for every import."""
    tree = ast.parse(MODULES[module].read_text())
    top_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            base = node.module
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names
            ]
        else:
            continue
        found += [(name, node.lineno, id(node) in top_level) for name in names]
    return found


def harness_imports(module: str) -> set[str]:
    return {name for name, _, _ in imports(module) if name in MODULES}


def test_every_module_has_a_layer():
    assert {module: layer(module) for module in MODULES}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_nothing_imports_upward(module):
    upward = [
        name for name in sorted(harness_imports(module)) if layer(name) > layer(module)
    ]
    assert upward == [], f"{module} (layer {layer(module)}) imports {upward}"


def test_no_import_cycle():
    graph = {module: harness_imports(module) - {module} for module in MODULES}
    cycles = []
    state: dict[str, str] = {}

    def visit(module, path):
        state[module] = "open"
        for imported in sorted(graph[module]):
            if state.get(imported) == "open":
                cycles.append(path[path.index(imported) :] + [imported])
            elif imported not in state:
                visit(imported, [*path, imported])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_vllm_and_optional_packages_are_imported_lazily(module):
    eager = [
        f"{name} (line {line})"
        for name, line, top_level in imports(module)
        if top_level and name.split(".")[0] in LAZY_ONLY
    ]
    assert eager == []


def test_the_contract_imports_no_vllm_and_starts_no_process():
    for module in MODULES:
        if module.startswith("harness.contract"):
            used = {name.split(".")[0] for name, _, _ in imports(module)}
            assert not used & {"vllm", "torch", "subprocess"}, module


def test_no_module_is_much_over_400_lines():
    long = {
        module: lines
        for module, path in MODULES.items()
        if (lines := len(path.read_text().splitlines())) > 400
    }
    assert long == {}
