"""What a target's upstream tests import, installed with pip (the `deps` verb).

vLLM's requirements/common.txt of the target's own tree, plus what its
tests/conftest.py imports and torch itself (common.txt names none), with
torch held at the CPU wheel that lies on disk on the project's machines (any
other torch pulls a multi-GB CUDA build).
"""

import sys
import tempfile
from pathlib import Path

from harness import processes
from harness.errors import SourceError
from harness.log import progress
from harness.targets import Target
from harness.trees.sources import pristine_tree

TORCH_PIN = "torch==2.13.0"
# Imported by vLLM's tests/conftest.py but absent from requirements/common.txt.
TEST_REQUIREMENTS = ("tblib", "pytest-asyncio")


def pip(*args: str, constrain_torch: bool = False) -> int:
    """``python -m pip ARGS`` in the running interpreter's environment, with
    torch held at TORCH_PIN if asked; return pip's exit status."""
    with tempfile.TemporaryDirectory() as scratch:
        constraints = Path(scratch) / "constraints.txt"
        constraints.write_text(TORCH_PIN + "\n")
        held = ["--constraint", str(constraints)] if constrain_torch else []
        command = [sys.executable, "-m", "pip", *args, *held]
        return processes.call(command)


def install_test_requirements(target: Target) -> int:
    """pip install the target's requirements/common.txt and the test extras,
    a progress line per step."""
    progress(f"deps: reading the requirements of target {target.name}'s tree")
    requirements = pristine_tree(target) / "requirements" / "common.txt"
    if not requirements.is_file():
        raise SourceError(f"target {target.name}: {requirements} does not exist")
    progress(
        f"deps: installing vLLM's requirements ({requirement_count(requirements)} "
        f"packages, {requirements}), {' and '.join(TEST_REQUIREMENTS)} for its "
        f"tests and {TORCH_PIN} into {sys.prefix}; pip's output follows ..."
    )
    status = pip(
        "install",
        "--requirement",
        str(requirements),
        *TEST_REQUIREMENTS,
        TORCH_PIN,  # requirements/common.txt names no torch; the tests need it
        constrain_torch=True,
    )
    progress(
        "deps: done" if status == 0 else f"deps: pip failed (exit status {status})"
    )
    return status


def requirement_count(requirements: Path) -> int:
    """The requirement lines of a requirements file (comments, blank lines and
    options such as ``-r`` left out)."""
    lines = requirements.read_text(encoding="utf-8", errors="replace").splitlines()
    words = (line.split("#", 1)[0].strip() for line in lines)
    return sum(1 for word in words if word and not word.startswith("-"))
