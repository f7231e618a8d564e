"""Fixtures and markers shared by every test of the harness.

Tests that need an external tool carry a marker: ``requires_quilt`` or
``requires_ruff``. Where the tool is missing they are skipped, with the
reason; with HARNESS_REQUIRE_TOOLS=1 (tox and CI set it) they fail instead,
so CI never passes by skipping them.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REQUIRE_TOOLS = "HARNESS_REQUIRE_TOOLS"


def _has_ruff() -> bool:
    if shutil.which("ruff"):
        return True
    probe = [sys.executable, "-m", "ruff", "--version"]
    return subprocess.run(probe, capture_output=True).returncode == 0


TOOLS = {
    "requires_quilt": ("quilt", lambda: shutil.which("quilt") is not None),
    "requires_ruff": ("ruff", _has_ruff),
}


def pytest_configure(config):
    for marker, (tool, _) in TOOLS.items():
        config.addinivalue_line(
            "markers",
            f"{marker}: needs {tool}; skipped without it unless "
            f"{REQUIRE_TOOLS}=1, which makes it a failure",
        )
    config.addinivalue_line(
        "markers",
        "hostile: a hostile input (a fork, receipt, capture, publisher, mount "
        "or signal); counted by `pytest -m hostile --collect-only -q`",
    )


def pytest_runtest_setup(item):
    for marker, (tool, present) in TOOLS.items():
        if item.get_closest_marker(marker) is None or present():
            continue
        if os.environ.get(REQUIRE_TOOLS) == "1":
            pytest.fail(f"{tool} is not installed, and {REQUIRE_TOOLS}=1")
        pytest.skip(f"{tool} is not installed ({REQUIRE_TOOLS}=1 makes this fail)")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty harness cache used by everything the test calls."""
    path = tmp_path / "cache"
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(path))
    return path


@pytest.fixture
def temporary(tmp_path, monkeypatch) -> Path:
    """The temporary directory (TMPDIR, and tempfile's cached one) inside the
    test's own, so that what a verb leaves there is the test's to see."""
    path = tmp_path / "tmp"
    path.mkdir()
    monkeypatch.setenv("TMPDIR", str(path))
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    return path


@pytest.fixture
def fake_checkout(tmp_path, monkeypatch):
    """Make ``tmp_path`` the checkout the harness works on: its pin file is
    tmp_path/harness/targets.toml (write it with support.trees.write_pins)."""
    from harness import checkout

    monkeypatch.setattr(checkout, "root", lambda: tmp_path)
    return tmp_path


@pytest.fixture
def ctrl_c():
    """SIGINT raises KeyboardInterrupt in this process, as under a terminal,
    even when the suite was started with it ignored (under ``nohup``, or as
    a background job of a script), which the harness then leaves ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
