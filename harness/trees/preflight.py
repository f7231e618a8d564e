"""What a long verb needs, checked before it does any work.

A verb that runs for minutes (`test`, `deps`, `fidelity`, `consumers`,
`e2e`) first looks for what it will need, without importing it
(importlib.util.find_spec, a fraction of a second): the harness's extras,
vLLM's requirements, pip. What is missing ends the verb at once with one
line, status 15 (MissingDependency), naming all of it and the commands that
install it, or the tox environment that has it; nothing has been fetched,
copied or run.
"""

import importlib.util
import sys

from harness.errors import MissingDependency

# What vLLM's upstream tests and the harness's workers import from an
# environment set up by `python -m harness deps` (requirements/common.txt,
# torch, and what vLLM's tests/conftest.py imports besides).
VLLM_REQUIREMENTS = ("torch", "transformers", "msgspec", "tblib", "pytest_asyncio")
# The modules each extra of pyproject.toml provides.
EXTRAS = {
    "verdict": ("pytest", "xdist"),
    "capture": ("zmq",),
    "consumers": ("dynamo", "vllm_router", "zmq"),
    "e2e": ("packaging",),
}


def missing(modules) -> list[str]:
    return [name for name in modules if importlib.util.find_spec(name) is None]


def extra(name: str) -> tuple[str, str] | None:
    """(what is missing, how to install it) for an extra, or None."""
    if gone := missing(EXTRAS[name]):
        return (
            f"the harness's {name!r} extra ({', '.join(gone)})",
            f"`pip install -e '.[{name}]'` in the checkout",
        )
    return None


def vllm_requirements(target: str) -> tuple[str, str] | None:
    """(what is missing, how to install it) for vLLM's test requirements."""
    if gone := missing(VLLM_REQUIREMENTS):
        return (
            f"vLLM's requirements ({', '.join(gone)})",
            f"`python -m harness deps --target {target}` (1-11 min as pip and "
            f"the load allow, 2.6 GB; torch held at 2.13.0)",
        )
    return None


def require(*problems: tuple[str, str] | None, toxenv: str | None = None) -> None:
    """One line naming everything missing and how to get it, or nothing."""
    found = [problem for problem in problems if problem is not None]
    if not found:
        return
    what = " and ".join(name for name, _ in found)
    how = ", then ".join(remedy for _, remedy in found)
    tox = f"; or use `tox -e {toxenv}`, which has it all" if toxenv else ""
    raise MissingDependency(
        f"{what} not installed for {sys.executable}; run {how}{tox}"
    )


def require_extra(name: str, toxenv: str | None = None) -> None:
    require(extra(name), toxenv=toxenv)


def require_pip() -> None:
    if missing(["pip"]):
        raise MissingDependency(
            f"pip is not installed for {sys.executable}: python -m ensurepip, "
            f"or run the harness from a virtual environment"
        )
