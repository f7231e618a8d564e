"""A ported diff is what quilt refresh writes for the same change."""

import os
import shutil
import subprocess

import pytest
from support import REPO_ROOT

from harness.series.port_diff import file_diff, file_order, mail_header

MAIL = (
    "From: Ada Lovelace <ada@example.org>\nSubject: [Misc] Change\n\nWhy.\n\n"
    "Signed-off-by: Ada Lovelace <ada@example.org>\n---\n"
)
FUNCTIONS = "".join(f"def step_{n}():\n    return {n}\n\n\n" for n in range(1, 13))
# path -> (before, after); None: no file.
CHANGES = {
    "pkg/pool.py": (FUNCTIONS, FUNCTIONS.replace("return 7", "return 70")),
    "pkg/new.py": (None, "made = True\n"),
    "pkg/gone.py": ("doomed = True\n", None),
    "pkg/empty.py": ("", "filled = True\n"),
    "pkg/no_newline.py": ("a = 1\nb = 2", "a = 1\nb = 3"),
}


def quilt(tree, *args):
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("QUILT")},
        "QUILTRC": str(REPO_ROOT / ".quiltrc"),
        "QUILT_PATCHES": "patches",
    }
    subprocess.run(["quilt", *args], cwd=tree, env=env, check=True, capture_output=True)


@pytest.mark.requires_quilt
def test_the_diff_is_the_one_quilt_refresh_writes_with_the_repositorys_quiltrc(
    tmp_path,
):
    tree = tmp_path / "tree"
    for path, (before, _) in CHANGES.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        if before is not None:
            (tree / path).write_text(before)
    quilt(tree, "new", "change.patch")
    quilt(tree, "add", *CHANGES)
    for path, (_, after) in CHANGES.items():
        if after is None:
            (tree / path).unlink()
        else:
            (tree / path).write_text(after)
    quilt(tree, "refresh")
    quilt(tree, "header", "-r")
    patch = tree / "patches" / "change.patch"
    patch.write_bytes(MAIL.encode() + patch.read_bytes())
    quilt(tree, "refresh")  # the header stays, the diff is rewritten as it was
    written = patch.read_bytes()
    work = tmp_path / "work"
    work.mkdir()
    ours = b"".join(
        file_diff(
            path, *(None if t is None else (t.encode(), 0o644) for t in sides), work
        )
        for path, sides in sorted(CHANGES.items())  # a new patch's files: sorted
    )
    assert mail_header(written) == MAIL.encode()
    assert written == MAIL.encode() + ours
    assert b"@@ -23,7 +23,7 @@ def step_6():" in ours


def test_an_unchanged_file_has_no_diff(tmp_path):
    state = (b"same\n", 0o644)
    assert file_diff("a.py", state, state, tmp_path) == b""


def test_files_keep_the_order_of_the_patch_and_new_ones_come_after_sorted():
    assert file_order(["z.py", "a.py"], ["a.py", "y.py", "b.py", "z.py"]) == [
        "z.py",
        "a.py",
        "b.py",
        "y.py",
    ]


def test_a_missing_diff_program_is_one_line(tmp_path, monkeypatch):
    from harness.errors import MissingDependency

    monkeypatch.setenv("PATH", str(tmp_path))
    assert shutil.which("diff") is None
    with pytest.raises(MissingDependency):
        file_diff("a.py", None, (b"x\n", 0o644), tmp_path)
