"""The harness run as a user runs it: ``python -m harness ARGS`` in a child."""

import subprocess
import sys

from support import REPO_ROOT


def harness(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def said(stderr: str) -> list[str]:
    """The lines of stderr other than the harness's progress (``harness: ...``)."""
    return [line for line in stderr.splitlines() if not line.startswith("harness: ")]
