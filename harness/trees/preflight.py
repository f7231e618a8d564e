"""What a long verb needs, checked before it does any work.

A verb that runs for minutes (`test`, `deps`, `fidelity`, `consumers`,
`e2e`) first looks for what it will need, without importing it
(importlib.util.find_spec, a fraction of a second): the harness's extras,
vLLM's requirements, pip. What is missing ends the verb at once with one
line, status 15 (MissingDependency), saying what to install or which tox
environment has it; nothing has been fetched, copied or run.
"""

import importlib.util
import sys

from harness.errors import MissingDependency

# What vLLM's upstream tests and the harness's workers import from an
# environment set up by `python -m harness deps` (requirements/common.txt,
# and what vLLM's tests/conftest.py imports besides).
VLLM_REQUIREMENTS = ("torch", "transformers", "msgspec", "tblib", "pytest_asyncio")
# The modules each extra of pyproject.toml provides.
EXTRAS = {
    "verdict": ("pytest", "xdist"),
    "capture": ("zmq",),
    "consumers": ("dynamo",),
    "e2e": ("packaging",),
}


def missing(modules) -> list[str]:
    return [name for name in modules if importlib.util.find_spec(name) is None]


def require_extra(extra: str, toxenv: str | None = None) -> None:
    if gone := missing(EXTRAS[extra]):
        tox = f", or use `tox -e {toxenv}`" if toxenv else ""
        raise MissingDependency(
            f"{', '.join(gone)} is not installed for {sys.executable}; install "
            f"the harness's {extra!r} extra: pip install -e '.[{extra}]' in the "
            f"checkout{tox}"
        )


def require_vllm_requirements(target: str, toxenv: str) -> None:
    """vLLM's test requirements, which `deps` installs."""
    if gone := missing(VLLM_REQUIREMENTS):
        raise MissingDependency(
            f"vLLM's requirements are not installed for {sys.executable} (no "
            f"{', '.join(gone)}): run `python -m harness deps --target {target}` "
            f"first (about 2 min and 2.7 GB; torch held at 2.13.0), or use "
            f"`tox -e {toxenv}`"
        )


def require_pip() -> None:
    if missing(["pip"]):
        raise MissingDependency(
            f"pip is not installed for {sys.executable}; `python -m ensurepip`, "
            f"or run the harness from a virtual environment"
        )
