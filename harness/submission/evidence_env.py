"""What the fail-before-fix runs need, checked before any work: pytest in
the running Python, what the target tree's tests/conftest.py imports at
module level (tblib, torch, ...) and its requirements/common.txt.

`require_pytest` needs no tree, so that an export from a Python without
pytest (a plain `pip install -e .`) ends at once; `require_test_environment`
reads the pristine tree. Each ends the export with one line naming what is
missing and the environment to use (MissingDependency, exit status 15).
"""

import ast
import importlib.metadata
import importlib.util
import re
import sys
from pathlib import Path

from harness.errors import MissingDependency

REQUIREMENTS = Path("requirements") / "common.txt"
CONFTEST = Path("tests") / "conftest.py"
_REQUIREMENT = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._\[\],-]*)[^;#]*(?:;(?P<marker>[^#]*))?"
)


def _use_instead(target_name: str, release: str) -> str:
    return (
        f"run export with the python of an environment that has {release}'s "
        f"test requirements (`tox -e vllm-{target_name} --notest`, then "
        f"`.tox/vllm-{target_name}/bin/python -m harness export ...`, or "
        f"`python -m harness deps --target {target_name}` in this one), or pass "
        "--no-fail-before-fix"
    )


def require_pytest(target_name: str, release: str) -> None:
    """Before any work: the runs need pytest in this Python."""
    if importlib.util.find_spec("pytest") is None:
        raise MissingDependency(
            f"export runs each patch's tests without and with its fix, and "
            f"{sys.executable} has no pytest; {_use_instead(target_name, release)}"
        )


def require_test_environment(tree: Path, target_name: str, release: str) -> None:
    """Before any work on the tree: pytest, what its tests/conftest.py
    imports and its requirements/common.txt are installed."""
    missing = [
        *(name for name in conftest_imports(tree) if not _importable(name)),
        *missing_requirements(tree),
    ]
    if importlib.util.find_spec("pytest") is None:
        missing.insert(0, "pytest")
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        raise MissingDependency(
            f"export runs {release}'s tests for each patch, and {sys.executable} "
            f"lacks {shown}; {_use_instead(target_name, release)}"
        )


def in_tree(tree: Path, module: str) -> bool:
    top = module.split(".")[0]
    return (tree / top).is_dir() or (tree / f"{top}.py").is_file()


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def conftest_imports(tree: Path) -> list[str]:
    """The top-level modules the tree's tests/conftest.py imports at module
    level that are neither the standard library's nor the tree's own."""
    try:
        module = ast.parse((tree / CONFTEST).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in module.body:
        if isinstance(node, ast.Import):
            names += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module.split(".")[0])
    return [
        name
        for name in dict.fromkeys(names)
        if name not in sys.stdlib_module_names and not in_tree(tree, name)
    ]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def missing_requirements(tree: Path) -> list[str]:
    """The distributions of the tree's requirements/common.txt that are not
    installed (markers evaluated where `packaging` is there to do it; a line
    with a marker it cannot evaluate is not asked for)."""
    try:
        lines = (tree / REQUIREMENTS).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    try:
        from packaging.markers import InvalidMarker, Marker
    except ImportError:
        Marker = None
    installed = {
        _normalized(dist.metadata["Name"] or "")
        for dist in importlib.metadata.distributions()
    }
    missing = []
    for line in lines:
        match = _REQUIREMENT.match(line)
        if not match or line.lstrip().startswith(("-", "#")):
            continue
        marker = (match["marker"] or "").strip()
        if marker:
            if Marker is None:
                continue
            try:
                if not Marker(marker).evaluate():
                    continue
            except InvalidMarker:
                continue
        name = match["name"].split("[")[0]
        if _normalized(name) not in installed:
            missing.append(name)
    return missing
