"""Tiny trees, sdists and targets that the harness's own tests build in tmp dirs."""

import difflib
import hashlib
import io
import os
import tarfile
from pathlib import Path

from harness.targets import SdistSource, Target


def write_pins(root: Path, body: str) -> Path:
    """A pin file at ROOT/harness/targets.toml, so that ROOT is its repo root."""
    (root / "harness").mkdir(parents=True, exist_ok=True)
    path = root / "harness" / "targets.toml"
    path.write_text(body)
    return path


def use_checkout(monkeypatch, pins: Path) -> None:
    """Make the checkout that holds ``pins`` the one the harness works on."""
    from harness import checkout

    monkeypatch.setattr(checkout, "root", lambda: pins.parent.parent)


def target_table(source: str, extra: str = "", patches: str = "patches") -> str:
    """One [targets.t] table with the given source inline table."""
    return f"""
[targets.t]
description = "a test target"
source = {source}
patches = "{patches}"
series = {{ default = "series", strict = "series.strict" }}
fixes = {{ default = ["K1"], strict = ["K1", "K2"] }}
upstream_tests = ["tests/test_a.py"]
upstream_tests_full = ["tests/test_a.py", "tests/test_b.py::test_one[x-1]"]
{extra}
"""


def write_tree(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def pip_without_user_configuration(monkeypatch) -> None:
    """pip as the user's configuration leaves it: no PIP_* variable, no
    configuration file (PIP_CONFIG_FILE=os.devnull, as pip's docs say), so
    that a constraint file, an extra index or ``only-binary`` on the machine
    running the tests changes nothing a test of the harness's pip asserts."""
    for name in [name for name in os.environ if name.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)


def pip_only_from(monkeypatch, index: Path) -> None:
    """pip fetching from the find-links directory ``index`` and nothing else."""
    pip_without_user_configuration(monkeypatch)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))


def make_sdist(directory: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A .tar.gz laid out like an sdist: one top-level NAME-VERSION directory."""
    directory.mkdir(parents=True, exist_ok=True)
    archive = directory / f"{name}-{version}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-{version}/{path}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return archive


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_target(source, patches_dir: Path | None = None, name: str = "t") -> Target:
    return Target(
        name=name,
        description="a test target",
        source=source,
        patches_dir=patches_dir or Path("/nonexistent/patches"),
        series={"default": "series", "strict": "series.strict"},
        upstream_tests=("tests/test_a.py",),
        upstream_tests_full=("tests/test_a.py", "tests/test_b.py"),
        fixes={"default": frozenset({"K1"}), "strict": frozenset({"K1", "K2"})},
        wheels={},
    )


def sdist_target(archive: Path, sha256: str | None = None) -> Target:
    name, version = archive.name.removesuffix(".tar.gz").rsplit("-", 1)
    return make_target(SdistSource(name, version, sha256 or sha256_of(archive)))


def diff(path: str, old: str | None, new: str | None, prefixes=("a/", "b/")) -> str:
    """A unified diff in the form quilt refreshes: a/ and b/ prefixes, -p1."""
    return "".join(
        difflib.unified_diff(
            (old or "").splitlines(keepends=True),
            (new or "").splitlines(keepends=True),
            prefixes[0] + path if old is not None else "/dev/null",
            prefixes[1] + path if new is not None else "/dev/null",
        )
    )


# A tiny tree with upstream-style tests, and their outcomes on it.
POOL = "def capacity():\n    return 4\n"
TEST_POOL = """\
import os

import pytest

from vllm.pool import capacity


def test_capacity():
    assert capacity() == 4


@pytest.mark.parametrize("blocks", [1, 2])
def test_param(blocks):
    assert blocks > 0


class TestDevice:
    def test_cpu(self):
        assert os.environ["VLLM_TARGET_DEVICE"] == "cpu"


def test_needs_gpu():
    raise AssertionError("no GPU here")


@pytest.mark.skip(reason="not on this machine")
def test_skipped():
    pass


@pytest.mark.xfail(strict=True)
def test_known_bug():
    raise AssertionError
"""
UPSTREAM_TREE = {
    "vllm/__init__.py": "",
    "vllm/pool.py": POOL,
    "tests/test_a.py": TEST_POOL,
}
UPSTREAM_OUTCOMES = {
    "tests/test_a.py::test_capacity": "passed",
    "tests/test_a.py::test_param[1]": "passed",
    "tests/test_a.py::test_param[2]": "passed",
    "tests/test_a.py::TestDevice::test_cpu": "passed",
    "tests/test_a.py::test_needs_gpu": "failed",
    "tests/test_a.py::test_skipped": "skipped",
    "tests/test_a.py::test_known_bug": "skipped",
}


def unwritable_directory(tmp_path: Path) -> Path:
    """A directory this process cannot create anything in: a read-only
    directory, or, for root (whom permissions do not stop), a place in
    sysfs."""
    import os

    if os.geteuid() == 0:
        return Path("/sys/vllm-kv-series-test")
    directory = tmp_path / "read-only"
    directory.mkdir(mode=0o555)
    return directory
