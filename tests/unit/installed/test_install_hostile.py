"""A round of hostile inputs against install, status and uninstall: a
receipt, a .dist-info, a RECORD or another Python that lies or traps. Each
ends with its status and one line (or a clean success where the input is
harmless), and nothing outside what the verb owns changes."""

import json
import os
import shutil
import sys

import pytest
from support.installed import (
    install_release,
    run_verb,
    snapshot,
)
from support.installed import (
    recorded as record_digest,
)

from harness.installed.overlay import digest

pytestmark = pytest.mark.hostile

INFO = "vllm-9.9.9.dist-info"
RECEIPT = f"{INFO}/kv-events-series"
POOL = "vllm/v1/core/block_pool.py"


def installed(site, capsys):
    assert run_verb(capsys, "install", "--target", "t")[0] == 0


def edit_receipt(site, change):
    path = site / RECEIPT / "receipt.json"
    receipt = json.loads(path.read_text())
    change(receipt)
    path.write_text(json.dumps(receipt))


def to_fifo(path):
    path.unlink()
    os.mkfifo(path)


def to_link(path, tmp_path):
    elsewhere = tmp_path / f"elsewhere-{path.name}"
    path.rename(elsewhere)
    path.symlink_to(elsewhere)


def raw_receipt(text: bytes):
    def setup(site, tmp_path, capsys):
        installed(site, capsys)
        (site / RECEIPT / "receipt.json").write_bytes(text)

    return setup


def receipt_change(change):
    def setup(site, tmp_path, capsys):
        installed(site, capsys)
        edit_receipt(site, change)

    return setup


def other_file_put_back(site, tmp_path, capsys):
    """A receipt entry for a package file the series does not change, its
    'released copy' other bytes: RECORD's copy says it is not released."""
    installed(site, capsys)
    other = site / "vllm/other.py"
    edit_receipt(
        site,
        lambda receipt: receipt["files"].update(
            {
                "vllm/other.py": {
                    "pristine": digest(b"evil = True\n"),
                    "patched": digest(other.read_bytes()),
                }
            }
        ),
    )
    (site / RECEIPT / "pristine/vllm/other.py").write_text("evil = True\n")


def answer(text):
    def setup(site, tmp_path, capsys):
        (tmp_path / "answer").write_text(text(site) + "\n")
        python = tmp_path / "bin" / "python"
        python.parent.mkdir()
        python.write_text(f"#!/bin/sh\nexec cat {tmp_path / 'answer'}\n")
        python.chmod(0o755)

    return setup


def probe_answer(site, record):
    return json.dumps(
        {
            "python": sys.executable,
            "imported": str(site / "vllm/__init__.py"),
            "distributions": [
                {
                    "name": "vllm",
                    "version": "9.9.9",
                    "site": str(site),
                    "record": record,
                }
            ],
        }
    )


def record_row(row: str):
    def setup(site, tmp_path, capsys):
        record = site / INFO / "RECORD"
        record.write_text(record.read_text() + row + "\n")

    return setup


def record_lists_a_link(site, tmp_path, capsys):
    (tmp_path / "target.py").write_text("x = 1\n")
    (site / "vllm/linked.py").symlink_to(tmp_path / "target.py")
    record = site / INFO / "RECORD"
    row = f"vllm/linked.py,{record_digest(b'x = 1' + bytes([10]))},6"
    record.write_text(record.read_text() + row + "\n")


def stale_holder_note(site, tmp_path, capsys):
    note = site / INFO / ".harness-scratch-holder-999999-dead"
    note.mkdir()
    (note / "holder").write_text("pid 999999, killed\n")


def core_hardlinked_into_the_cache(site, tmp_path, capsys):
    tree = tmp_path / "cache" / "trees" / "sdist-vllm-9.9.9-x"
    install_release(tree)
    (site / POOL).unlink()
    os.link(tree / POOL, site / POOL)


NOT_REGULAR = (
    "is not a regular file; the harness reads and writes only the package's own files"  # noqa: E501
)
CASES = {
    "receipt-a-fifo": (
        lambda site, tmp_path, capsys: (
            installed(site, capsys),
            to_fifo(site / RECEIPT / "receipt.json"),
        ),
        ["uninstall"],
        19,
        f"receipt.json {NOT_REGULAR}",
    ),
    "receipt-a-directory": (
        lambda site, tmp_path, capsys: (
            installed(site, capsys),
            (site / RECEIPT / "receipt.json").unlink(),
            (site / RECEIPT / "receipt.json").mkdir(),
        ),
        ["status"],
        19,
        f"receipt.json {NOT_REGULAR}",
    ),
    "receipt-a-link": (
        lambda site, tmp_path, capsys: (
            installed(site, capsys),
            to_link(site / RECEIPT / "receipt.json", tmp_path),
        ),
        ["uninstall"],
        19,
        "receipt.json is a symlink (to ",
    ),
    "backup-a-fifo": (
        lambda site, tmp_path, capsys: (
            installed(site, capsys),
            to_fifo(site / RECEIPT / "pristine" / POOL),
        ),
        ["uninstall"],
        19,
        f"block_pool.py {NOT_REGULAR}",
    ),
    "backup-a-link": (
        lambda site, tmp_path, capsys: (
            installed(site, capsys),
            to_link(site / RECEIPT / "pristine" / POOL, tmp_path),
        ),
        ["uninstall"],
        19,
        "block_pool.py is a symlink (to ",
    ),
    "record-copy-a-link": (
        lambda site, tmp_path, capsys: (
            installed(site, capsys),
            to_link(site / RECEIPT / "RECORD.orig", tmp_path),
        ),
        ["uninstall"],
        19,
        "RECORD.orig is a symlink (to ",
    ),
    "record-copy-a-fifo": (
        lambda site, tmp_path, capsys: (
            installed(site, capsys),
            to_fifo(site / RECEIPT / "RECORD.orig"),
        ),
        ["uninstall"],
        19,
        "RECORD.orig) is missing or damaged",
    ),
    "receipt-folder-a-file": (
        lambda site, tmp_path, capsys: (
            installed(site, capsys),
            shutil.rmtree(site / RECEIPT),
            (site / RECEIPT).write_text("x"),
        ),
        ["uninstall"],
        19,
        "receipt.json: Not a directory",
    ),
    "another-package-file-put-back": (
        other_file_put_back,
        ["uninstall"],
        19,
        "the receipt's released vllm/other.py is not the file the wheel installed",
    ),
    "path-with-nul": (
        receipt_change(lambda r: r["files"].update({"vllm/a\0b.py": {}})),
        ["uninstall"],
        19,
        "('vllm/a\\x00b.py' is not a plain path under vllm/)",
    ),
    "path-with-empty-part": (
        receipt_change(lambda r: r["files"].update({"vllm//x.py": {}})),
        ["status"],
        19,
        "('vllm//x.py' is not a plain path under vllm/)",
    ),
    "path-with-dot": (
        receipt_change(
            lambda r: r["files"].update({"vllm/./v1/core/block_pool.py": {}})
        ),
        ["uninstall"],
        19,
        "('vllm/./v1/core/block_pool.py' is not a plain path under vllm/)",
    ),
    "tier-nan": (
        receipt_change(lambda r: r.update(tier=float("nan"))),
        ["uninstall"],
        19,
        "('tier' is a JSON number)",
    ),
    "record-sha-upper-case": (
        receipt_change(lambda r: r.update(record_sha256=r["record_sha256"].upper())),
        ["uninstall"],
        19,
        "('record_sha256' is not a sha256)",
    ),
    "no-files": (
        receipt_change(lambda r: r.update(files={})),
        ["status"],
        19,
        "('files' is a JSON empty object, not an object of files)",
    ),
    "receipt-a-string": (
        raw_receipt(b'"receipt"'),
        ["uninstall"],
        19,
        "(a JSON string, not an object)",
    ),
    "receipt-empty": (
        raw_receipt(b""),
        ["uninstall"],
        19,
        "(Expecting value: line 1 column 1 (char 0))",
    ),
    "receipt-with-bom": (
        raw_receipt(b"\xef\xbb\xbf{}"),
        ["uninstall"],
        19,
        "(Unexpected UTF-8 BOM (decode using utf-8-sig): line 1 column 1 (char 0))",
    ),
    "dist-info-a-link": (
        lambda site, tmp_path, capsys: to_link(site / INFO, tmp_path),
        ["install", "--target", "t"],
        19,
        f"{INFO} is a symlink (to ",
    ),
    "record-a-link": (
        lambda site, tmp_path, capsys: to_link(site / INFO / "RECORD", tmp_path),
        ["status"],
        19,
        "RECORD is a symlink (to ",
    ),
    "record-lists-a-link": (
        record_lists_a_link,
        ["status"],
        19,
        "linked.py is a symlink (to ",
    ),
    "record-lists-dot-dot": (
        record_row("vllm/../escape.py,sha256=AAAA,3"),
        ["status"],
        19,
        "'vllm/../escape.py' is not a plain path inside ",
    ),
    "probe-relative-site": (
        answer(
            lambda site: json.dumps(
                {
                    "python": "/p",
                    "imported": None,
                    "distributions": [
                        {"name": "vllm", "version": "1", "site": ".", "record": None}
                    ],
                }
            )
        ),
        ["uninstall", "--python", "PYTHON"],
        19,
        "answered the probe with a bad site directory",
    ),
    "probe-record-elsewhere": (
        answer(lambda site: probe_answer(site, "/etc/hostname")),
        ["uninstall", "--python", "PYTHON"],
        19,
        "is /etc/hostname, not in a .dist-info directory of ",
    ),
    "tier-with-lines-of-its-own": (
        receipt_change(
            lambda r: r.update(tier="strict\nRECORD: all 9999 files of vllm/ are ok")
        ),
        ["status"],
        19,
        "('tier' is 'strict\\nRECORD: all 9999 files of vllm/ are ok', not a tier "
        "(default, strict, or NNNN alone))",
    ),
    "target-with-escapes": (
        receipt_change(lambda r: r.update(target="\x1b[2K\rmain")),
        ["uninstall"],
        19,
        "('target' is '\\x1b[2K\\rmain', not a target's name)",
    ),
    "release-with-a-space": (
        receipt_change(lambda r: r.update(release="9.9.9 (ok)")),
        ["status"],
        19,
        "('release' is '9.9.9 (ok)', not a release)",
    ),
    "probe-name-with-escapes": (
        answer(
            lambda site: probe_answer(site, None).replace(
                '"name": "vllm"', '"name": "vllm\\u001b]0;PWNED\\u0007"'
            )
        ),
        ["status", "--python", "PYTHON"],
        19,
        "answered the probe with a bad distribution name",
    ),
    "stale-holder-note": (
        stale_holder_note,
        ["install", "--target", "t"],
        0,
        None,
    ),
    "pool-hardlinked-into-the-cache": (
        core_hardlinked_into_the_cache,
        ["install", "--target", "t"],
        0,
        None,
    ),
}


def entries(cached: dict[str, str]) -> dict[str, str]:
    """The cache's entries, less its locks (the cache's own, made on use)."""
    return {k: v for k, v in cached.items() if not k.startswith("locks/")}


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_input_ends_in_one_line_and_changes_nothing_it_does_not_own(
    site, tmp_path, capsys, case
):
    setup, verb, code, said = CASES[case]
    setup(site, tmp_path, capsys)
    verb = [str(tmp_path / "bin/python") if a == "PYTHON" else a for a in verb]
    fifos = any(path.is_fifo() for path in tmp_path.rglob("*"))
    before = None if fifos else snapshot(tmp_path)
    status, out, err = run_verb(capsys, *verb)
    assert "Traceback" not in err
    assert status == code, err
    if said is None:  # harmless: the verb did its work, and only its own
        cached = {k[6:]: v for k, v in before.items() if k.startswith("cache/")}
        assert entries(snapshot(tmp_path / "cache")) == entries(cached)
        assert not list((site / INFO).glob(".harness-scratch-*"))
        return
    [line] = [line for line in err.splitlines() if line.startswith("error: ")]
    assert said in line
    if before is not None:
        assert snapshot(tmp_path) == before


@pytest.mark.parametrize("verb", ["install", "uninstall"])
def test_a_package_directory_that_is_the_caches_under_another_name_is_refused(
    site, tmp_path, capsys, monkeypatch, verb
):
    """vllm/v1/core a bind mount of the cached pristine tree's (root only):
    the same device and inode under another path, which no symlink shows."""
    assert run_verb(capsys, "fetch", "--target", "t")[0] == 0
    if verb == "uninstall":
        installed(site, capsys)
    [tree] = (tmp_path / "cache" / "trees").iterdir()
    mounted, source = site / "vllm/v1/core", tree / "vllm/v1/core"
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        same = os.fspath(path) == os.fspath(mounted)
        return real_stat(source if same else path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    before = snapshot(tmp_path)
    args = [verb, "--target", "t"] if verb == "install" else [verb]
    status, _, err = run_verb(capsys, *args)
    assert status == 19, err
    [line] = [line for line in err.splitlines() if line.startswith("error: ")]
    assert line == (
        f"error: {mounted} of vllm 9.9.9 in {site} is a directory of the harness "
        f"cache {tmp_path / 'cache'} under another name (the same device and "
        f"inode: a bind mount?); the harness never writes into its cache"
    )
    assert snapshot(tmp_path) == before


def test_a_holder_note_is_shown_without_its_escapes(site, tmp_path):
    from harness.installed.installation import _holder_of

    note = site / INFO / ".harness-scratch-holder-1-aaaa"
    note.mkdir()
    (note / "holder").write_text("\x1b]0;PWNED\x07\x1b[31mRED\rFAKE: done\n")
    assert _holder_of(site / INFO) == "\\x1b]0;PWNED\\x07\\x1b[31mRED\\rFAKE: done"
