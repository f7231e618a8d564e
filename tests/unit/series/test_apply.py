import subprocess

import pytest
from support.trees import diff, target_table, use_checkout, write_pins, write_tree

from harness import cli, targets
from harness.errors import SeriesError
from harness.series.apply import apply_onto, build_patched_tree
from harness.series.model import read_series

PRISTINE = {
    "vllm/block_pool.py": "".join(f"line {n}\n" for n in range(1, 21)),
    "vllm/old.py": "doomed = True\n",
    "tests/test_pool.py": "def test_pool():\n    assert True\n",
    "README.md": "pristine\n",
}


def edited(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new)


POOL = PRISTINE["vllm/block_pool.py"]
GOOD_PATCHES = {
    "0001-emit-parent.patch": "Subject: emit the parent\n\n"
    + diff("vllm/block_pool.py", POOL, edited(POOL, "line 3\n", "line three\n")),
    "0002-add-module.patch": diff("vllm/events/ancestry.py", None, "FILLED = 1\n"),
    "0003-drop-old.patch": diff("vllm/old.py", PRISTINE["vllm/old.py"], None),
    "0004-readme-p0.patch": diff("README.md", "pristine\n", "patched\n", ("", "")),
}
GOOD_SERIES = """# the default tier
0001-emit-parent.patch
0002-add-module.patch -p1
0003-drop-old.patch   # trailing comment

0004-readme-p0.patch -p0
"""
CORRUPT = "--- a/vllm/block_pool.py\n+++ b/vllm/block_pool.py\n@@ -1,3 +1,3 @@\n-x\n"
STALE = diff(
    "vllm/block_pool.py",
    edited(POOL, "line 12\n", "line twelve\n"),
    edited(POOL, "line 12\n", "line 12!\n"),
)


# How a series is applied; quilt only where it is installed (tests/conftest.py).
METHODS = [pytest.param("quilt", marks=pytest.mark.requires_quilt), "git"]


def make_series(tmp_path, monkeypatch, patches: dict[str, str], series: str):
    """Target t: a path source with PRISTINE, these patches and series file."""
    patches_dir = write_tree(tmp_path / "patches", patches)
    (patches_dir / "series").write_text(series)
    write_tree(tmp_path / "pristine", PRISTINE)
    pins = write_pins(tmp_path, target_table('{ path = "pristine" }'))
    use_checkout(monkeypatch, pins)
    return targets.get_target("t")


def tree_files(root):
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_series_file_parsing(tmp_path, monkeypatch):
    (tmp_path / "series").write_text(GOOD_SERIES)
    entries = read_series(tmp_path / "series")
    assert [(entry.patch, entry.strip) for entry in entries] == [
        ("0001-emit-parent.patch", 1),
        ("0002-add-module.patch", 1),
        ("0003-drop-old.patch", 1),
        ("0004-readme-p0.patch", 0),
    ]
    (tmp_path / "series").write_text("one.patch -R\n")
    with pytest.raises(SeriesError, match="series:1: option '-R' of one.patch"):
        read_series(tmp_path / "series")


@pytest.mark.requires_quilt
def test_quilt_and_git_apply_give_identical_trees(tmp_path, monkeypatch):
    target = make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    monkeypatch.setenv("HARNESS_APPLY_WITH", "quilt")
    by_quilt = tree_files(build_patched_tree(target, "default", tmp_path / "quilt"))
    monkeypatch.setenv("HARNESS_APPLY_WITH", "git")
    by_git = tree_files(build_patched_tree(target, "default", tmp_path / "git"))
    assert by_quilt == by_git
    assert by_git["vllm/events/ancestry.py"] == b"FILLED = 1\n"
    assert b"line three\n" in by_git["vllm/block_pool.py"]
    assert by_git["README.md"] == b"patched\n"
    assert "vllm/old.py" not in by_git
    assert not (tmp_path / "quilt" / ".pc").exists()
    assert tree_files(tmp_path / "pristine") == {
        name: text.encode() for name, text in sorted(PRISTINE.items())
    }


def test_empty_series_copies_the_pristine_tree(tmp_path, monkeypatch):
    target = make_series(tmp_path, monkeypatch, {}, "# nothing yet\n")
    dest = build_patched_tree(target, "default", tmp_path / "out")
    assert tree_files(dest) == tree_files(tmp_path / "pristine")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    ("bad_patch", "expected_detail"),
    [(CORRUPT, ["malformed patch", "corrupt patch"]), (STALE, ["vllm/block_pool.py"])],
    ids=["corrupt", "stale-hunk"],
)
def test_failing_patch_is_named_and_dest_left_absent(
    tmp_path, monkeypatch, capsys, method, bad_patch, expected_detail
):
    patches = {**GOOD_PATCHES, "0005-bad.patch": bad_patch}
    make_series(tmp_path, monkeypatch, patches, GOOD_SERIES + "0005-bad.patch\n")
    monkeypatch.setenv("HARNESS_APPLY_WITH", method)
    dest = tmp_path / "out" / "patched"
    assert (
        cli.main(["apply", "--target", "t", "--dest", str(dest)])
        == SeriesError.exit_code
    )
    err = capsys.readouterr().err
    assert "error: patch 0005-bad.patch from" in err
    assert any(detail in err for detail in expected_detail), err
    assert "Traceback" not in err
    assert not dest.exists()
    assert list((tmp_path / "out").iterdir()) == []


def test_missing_series_file_fails_at_apply_time(tmp_path, monkeypatch, capsys):
    target = make_series(tmp_path, monkeypatch, {}, "")
    (target.patches_dir / "series").unlink()
    assert (
        cli.main(["apply", "--target", "t", "--dest", str(tmp_path / "x")])
        == SeriesError.exit_code
    )
    err = capsys.readouterr().err
    assert "target t: the default tier's series file" in err
    assert "does not exist" in err


def test_series_naming_a_missing_patch_is_refused(tmp_path, monkeypatch):
    target = make_series(tmp_path, monkeypatch, {}, "0001-ghost.patch\n")
    with pytest.raises(SeriesError, match="names 0001-ghost.patch, but .* not exist"):
        build_patched_tree(target, "default", tmp_path / "out")


def test_existing_dest_is_refused(tmp_path, monkeypatch):
    target = make_series(tmp_path, monkeypatch, {}, "")
    (tmp_path / "out").mkdir()
    with pytest.raises(SeriesError, match="already exists"):
        build_patched_tree(target, "default", tmp_path / "out")


def test_unknown_apply_method_is_refused(tmp_path, monkeypatch):
    target = make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    monkeypatch.setenv("HARNESS_APPLY_WITH", "patch")
    with pytest.raises(SeriesError, match="HARNESS_APPLY_WITH=patch is neither"):
        build_patched_tree(target, "default", tmp_path / "out")


def git(*args, cwd):
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def make_fork(tmp_path):
    fork = write_tree(tmp_path / "fork", PRISTINE)
    git("init", "-q", cwd=fork)
    git("add", ".", cwd=fork)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base", cwd=fork)
    return fork


@pytest.mark.parametrize("method", METHODS)
def test_onto_applies_in_place(tmp_path, monkeypatch, method):
    target = make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    fork = make_fork(tmp_path)
    monkeypatch.setenv("HARNESS_APPLY_WITH", method)
    apply_onto(target, "default", fork)
    assert (fork / "vllm" / "events" / "ancestry.py").read_text() == "FILLED = 1\n"
    assert not (fork / "vllm" / "old.py").exists()
    assert not (fork / ".pc").exists()
    assert " M vllm/block_pool.py" in git("status", "--porcelain", cwd=fork)


def test_onto_refuses_a_dirty_fork(tmp_path, monkeypatch, capsys):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    fork = make_fork(tmp_path)
    (fork / "README.md").write_text("my local edit\n")
    assert (
        cli.main(["apply", "--target", "t", "--onto", str(fork)])
        == SeriesError.exit_code
    )
    assert "has uncommitted changes ( M README.md)" in capsys.readouterr().err
    assert (fork / "README.md").read_text() == "my local edit\n"
    assert (fork / "vllm" / "old.py").exists()


def test_onto_refuses_a_directory_that_is_not_a_checkout(tmp_path, monkeypatch):
    target = make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    with pytest.raises(SeriesError, match="is not the top of a git checkout"):
        apply_onto(target, "default", tmp_path / "pristine")


@pytest.mark.parametrize("method", METHODS)
def test_onto_rolls_back_when_a_later_patch_fails(tmp_path, monkeypatch, method):
    patches = {**GOOD_PATCHES, "0005-bad.patch": STALE}
    target = make_series(
        tmp_path, monkeypatch, patches, GOOD_SERIES + "0005-bad.patch\n"
    )
    fork = make_fork(tmp_path)
    monkeypatch.setenv("HARNESS_APPLY_WITH", method)
    with pytest.raises(SeriesError, match="patch 0005-bad.patch"):
        apply_onto(target, "default", fork)
    assert git("status", "--porcelain", "--ignored", cwd=fork) == ""
    assert tree_files(fork / "vllm") == tree_files(tmp_path / "pristine" / "vllm")
