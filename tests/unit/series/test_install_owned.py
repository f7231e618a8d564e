"""install, status and uninstall read and write only the package's own files,
trust a receipt only once it is valid data, take one installation at a time,
and ask another Python only within bounds: every refusal one line, status
19, and nothing outside what the verb owns changed."""

import json
import shutil

import pytest
from support.installed import (
    install_release,
    refused_line,
    release_target,
    run_verb,
    snapshot,
)

from harness.series.overlay import digest

CORE = "vllm/v1/core"
INFO = "vllm-9.9.9.dist-info"


@pytest.fixture
def site(tmp_path, monkeypatch):
    """vllm 9.9.9 installed in tmp_path/site, target t its release."""
    release_target(tmp_path, monkeypatch)
    site = tmp_path / "site"
    install_release(site)
    monkeypatch.setenv("PYTHONPATH", str(site))
    return site


def receipt_of(site):
    return site / INFO / "kv-events-series" / "receipt.json"


# --------------------------------------------------------------------------
# Only the package's own files: no symlink out of it, no '..'
# --------------------------------------------------------------------------


def test_a_package_folder_linked_into_the_cache_is_never_written(
    site, tmp_path, capsys
):
    """The issue's case: vllm/v1/core a symlink into the cache's pristine
    tree, whose files are what RECORD says."""
    pristine = tmp_path / "cache" / "trees" / "sdist-vllm-9.9.9-x"
    install_release(pristine)
    shutil.rmtree(site / CORE)
    (site / CORE).symlink_to(pristine / CORE)
    before = snapshot(tmp_path)
    for verb in (["install", "--target", "t"], ["status"]):
        line = refused_line(capsys, *verb)
        assert line.startswith(f"error: {site / CORE} is a symlink (to {pristine}")
        assert line.endswith("never through a link: reinstall it with pip")
    assert snapshot(tmp_path) == before


def test_a_package_file_linked_elsewhere_is_refused(site, tmp_path, capsys):
    outside = tmp_path / "elsewhere.py"
    pool = site / CORE / "block_pool.py"
    outside.write_bytes(pool.read_bytes())
    pool.unlink()
    pool.symlink_to(outside)
    before = snapshot(tmp_path)
    line = refused_line(capsys, "install", "--target", "t")
    assert line.startswith(f"error: {pool} is a symlink (to {outside});")
    assert snapshot(tmp_path) == before


def test_the_package_itself_linked_elsewhere_is_refused(site, tmp_path, capsys):
    (site / "vllm").rename(tmp_path / "moved")
    (site / "vllm").symlink_to(tmp_path / "moved")
    before = snapshot(tmp_path)
    line = refused_line(capsys, "install", "--target", "t")
    assert line.startswith(f"error: {site / 'vllm'} is a symlink")
    assert snapshot(tmp_path) == before


def test_a_receipt_folder_linked_elsewhere_is_refused(site, tmp_path, capsys):
    assert run_verb(capsys, "install", "--target", "t")[0] == 0
    receipt = site / INFO / "kv-events-series"
    receipt.rename(tmp_path / "receipt-elsewhere")
    receipt.symlink_to(tmp_path / "receipt-elsewhere")
    before = snapshot(tmp_path)
    for verb in (["uninstall"], ["status"], ["install", "--target", "t"]):
        line = refused_line(capsys, *verb)
        assert line.startswith(f"error: {receipt} is a symlink")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "path",
    ["vllm/../../victimdir/victim.txt", "../victimdir/victim.txt", "/victim.txt"],
)
def test_a_receipt_path_out_of_the_package_is_never_written(
    site, tmp_path, capsys, path
):
    """The issue's case: a receipt entry reaching out of site-packages, with
    digests that match the victim and a 'released copy' ready to write."""
    assert run_verb(capsys, "install", "--target", "t")[0] == 0
    victim = tmp_path / "victimdir" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("the victim's own\n")
    receipt = json.loads(receipt_of(site).read_text())
    receipt["files"][path] = {
        "pristine": digest(b"overwritten\n"),
        "patched": digest(victim.read_bytes()),
    }
    receipt_of(site).write_text(json.dumps(receipt))
    backup = receipt_of(site).parent / "pristine" / path.lstrip("/")
    backup.parent.mkdir(parents=True, exist_ok=True)
    backup.write_text("overwritten\n")
    before = snapshot(tmp_path)
    for verb in (["uninstall"], ["status"]):
        line = refused_line(capsys, *verb)
        assert f"error: {path!r} is not " in line
    assert victim.read_text() == "the victim's own\n"
    assert snapshot(tmp_path) == before


def test_a_package_file_that_is_a_fifo_is_refused_not_waited_on(site, tmp_path, capsys):
    import os

    other = site / "vllm" / "other.py"
    other.unlink()
    os.mkfifo(other)
    line = refused_line(capsys, "status")
    assert line == (
        f"error: {other} is not a regular file; the harness reads and writes "
        f"only the package's own files"
    )
