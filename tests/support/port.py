"""Two tiny releases, a series for the older one, and `port` run between them."""

import subprocess
import tempfile
from pathlib import Path

from harness import cli
from support.trees import use_checkout, write_pins, write_tree

AUTHOR = "Ada Lovelace <ada@example.org>"
PINS = """
[defaults]
series = { default = "series", strict = "series.strict" }
fixes = { default = ["K1"], strict = ["K1", "K2"] }
upstream_tests = ["tests/test_a.py"]
upstream_tests_full = ["tests/test_a.py"]

[targets.old]
description = "the release the series is made for"
source = { path = "old-tree" }
patches = "patches/old"

[targets.new]
description = "the next release, no series yet"
source = { path = "new-tree" }
patches = "patches/new"
"""
# A module with functions, so that GNU diff -p names one after each `@@`.
POOL = "".join(
    f"def step_{n}():\n    value = {n}\n    return value\n\n\n" for n in range(1, 11)
)
TEST = "def test_pool():\n    assert True\n"
OLD = {"pkg/pool.py": POOL, "tests/test_pool.py": TEST}
NEW_TEST = "def test_ancestry():\n    assert 1\n"


def diff(path: str, old: str | None, new: str | None) -> str:
    """A file's diff as quilt refresh writes it (GNU diff -p -u, a/ b/)."""
    with tempfile.TemporaryDirectory() as scratch:
        sides = []
        for side, text, prefix in (("old", old, "a/"), ("new", new, "b/")):
            if text is None:
                sides += ["--label", "/dev/null"]
                continue
            (Path(scratch) / side).write_text(text)
            sides += ["--label", prefix + path]
        files = [
            str(Path(scratch) / side) if text is not None else "/dev/null"
            for side, text in (("old", old), ("new", new))
        ]
        result = subprocess.run(
            ["diff", "-p", "-u", *sides, *files],
            capture_output=True,
            text=True,
            env={"LC_ALL": "C"},
        )
    assert result.returncode == 1, result.stderr
    return result.stdout


def mail(subject: str, diff_text: str) -> str:
    return (
        f"From: {AUTHOR}\nDate: Mon, 30 Nov 2026 01:28:02 +0000\n"
        f"Subject: {subject}\n\nWhy it changes.\n\nSigned-off-by: {AUTHOR}\n"
        f"---\n{diff_text}"
    )


def edited(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


AFTER_FIRST = edited(POOL, "    value = 5\n", "    value = 50\n")
PATCHES = {
    "0001-fifty.patch": mail(
        "[Bugfix][KV Events] Make step five fifty",
        diff("pkg/pool.py", POOL, AFTER_FIRST),
    ),
    "0002-test.patch": mail(
        "[Misc] Test the ancestry",
        diff("tests/test_ancestry.py", None, NEW_TEST)
        + diff("pkg/pool.py", AFTER_FIRST, edited(AFTER_FIRST, "= 9\n", "= 90\n")),
    ),
}
SERIES = "0001-fifty.patch\n0002-test.patch\n"


def make_releases(root, monkeypatch, new: dict[str, str]):
    """A checkout at root with targets old (OLD, PATCHES) and new (``new``)."""
    write_tree(root / "old-tree", OLD)
    write_tree(root / "new-tree", new)
    patches = write_tree(root / "patches" / "old", PATCHES)
    (patches / "series").write_text(SERIES)
    pins = write_pins(root, PINS)
    use_checkout(monkeypatch, pins)
    return patches


def port(capsys, *options: str, to: str = "new"):
    """`port --from old --to TO` with options: (status, stdout, stderr)."""
    status = cli.main(["port", "--from", "old", "--to", to, *options])
    captured = capsys.readouterr()
    return status, captured.out, captured.err
