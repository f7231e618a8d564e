import pytest
from support.series import (
    CORRUPT,
    GOOD_PATCHES,
    GOOD_SERIES,
    PRISTINE,
    STALE,
    git,
    make_fork,
    make_series,
    tree_files,
)
from support.trees import (
    target_table,
    unwritable_directory,
    use_checkout,
    write_pins,
    write_tree,
)

from harness import cli
from harness.errors import OutputError, SeriesError
from harness.series.apply import apply_onto, build_patched_tree
from harness.series.model import read_series

# How a series is applied; quilt only where it is installed (tests/conftest.py).
METHODS = [pytest.param("quilt", marks=pytest.mark.requires_quilt), "git"]


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


def test_an_empty_series_is_refused(tmp_path, monkeypatch, capsys):
    make_series(tmp_path, monkeypatch, {}, "# nothing yet\n")
    dest = tmp_path / "out"
    assert cli.main(["apply", "--target", "t", "--dest", str(dest)]) == 7
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 'patches' / 'series'} lists no patch; there is "
        f"nothing to apply\n"
    )
    assert not dest.exists()


@pytest.mark.hostile
@pytest.mark.parametrize("method", METHODS)
def test_a_crlf_patch_is_refused_whichever_tool_applies(
    tmp_path, monkeypatch, capsys, method
):
    patches = dict(GOOD_PATCHES)
    patches["0002-add-module.patch"] = patches["0002-add-module.patch"].replace(
        "\n", "\r\n"
    )
    make_series(tmp_path, monkeypatch, patches, GOOD_SERIES)
    monkeypatch.setenv("HARNESS_APPLY_WITH", method)
    dest = tmp_path / "out"
    assert cli.main(["apply", "--target", "t", "--dest", str(dest)]) == 7
    patch = tmp_path / "patches" / "0002-add-module.patch"
    assert capsys.readouterr().err == (
        f"error: {patch}:1: CRLF line ending; quilt applies such a patch and git "
        f"apply does not, so convert it to LF (dos2unix) and check it still "
        f"applies\n"
    )
    assert not dest.exists()


@pytest.mark.hostile
def test_a_series_file_that_is_not_utf8_is_one_line(tmp_path, monkeypatch, capsys):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    series = tmp_path / "patches" / "series"
    series.write_bytes(GOOD_SERIES.encode() + b"0005-caf\xe9.patch\n")
    assert cli.main(["apply", "--target", "t", "--dest", str(tmp_path / "x")]) == 7
    assert capsys.readouterr().err == (
        f"error: {series}:7: not UTF-8 (byte 0xe9 at column 9); a series file "
        f"names its patches in UTF-8\n"
    )


def test_an_unknown_apply_method_is_refused_before_any_copy(
    tmp_path, monkeypatch, capsys
):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    monkeypatch.setenv("HARNESS_APPLY_WITH", "patch")
    assert cli.main(["apply", "--target", "t", "--dest", str(tmp_path / "x")]) == 7
    assert capsys.readouterr().err == (
        "error: HARNESS_APPLY_WITH=patch is neither quilt nor git\n"
    )


@pytest.mark.hostile
def test_a_dest_inside_a_path_source_is_refused_at_once(tmp_path, monkeypatch, capsys):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    dest = tmp_path / "pristine" / "patched"
    assert cli.main(["apply", "--target", "t", "--dest", str(dest)]) == 11
    assert capsys.readouterr().err == (
        f"error: {dest} is inside the pristine tree {tmp_path / 'pristine'} of "
        f"target t, which would be copied into itself; choose a destination "
        f"outside it\n"
    )
    assert not dest.exists()


@pytest.mark.hostile
def test_a_dest_that_is_a_dangling_symlink_is_one_line(tmp_path, monkeypatch, capsys):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    dest = tmp_path / "link"
    dest.symlink_to(tmp_path / "nowhere")
    assert cli.main(["apply", "--target", "t", "--dest", str(dest)]) == 11
    assert capsys.readouterr().err == (
        f"error: {dest} is a symlink (to {tmp_path / 'nowhere'}); give a path "
        f"that does not exist yet\n"
    )
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.hostile
def test_a_relative_dest_with_the_working_directory_removed_is_one_line(
    tmp_path, monkeypatch, capsys
):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    (tmp_path / "gone").mkdir()
    monkeypatch.chdir(tmp_path / "gone")
    (tmp_path / "gone").rmdir()
    assert cli.main(["apply", "--target", "t", "--dest", "d"]) == 11
    assert capsys.readouterr().err == (
        "error: --dest d is relative, and the working directory it would be "
        "taken from cannot be read (No such file or directory: removed?); give "
        "an absolute path, or run from a directory that exists\n"
    )


@pytest.mark.hostile
def test_a_dest_whose_name_is_too_long_is_one_line(tmp_path, monkeypatch, capsys):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    dest = tmp_path / ("y" * 300) / "patched"
    assert cli.main(["apply", "--target", "t", "--dest", str(dest)]) == 11
    assert capsys.readouterr().err == (
        f"error: cannot make {dest}: File name too long\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "harness",
        "patches",
        "pristine",
    ]


@pytest.mark.hostile
def test_a_dest_under_a_read_only_parent_is_one_line(tmp_path, monkeypatch, capsys):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    dest = unwritable_directory(tmp_path) / "patched"
    assert cli.main(["apply", "--target", "t", "--dest", str(dest)]) == 11
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith(f"error: cannot build the patched tree at {dest}: ")
    assert not any("Traceback" in line for line in err)


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
    assert not (tmp_path / "out").exists()  # the folder it made is gone too


@pytest.mark.hostile
@pytest.mark.parametrize("how", ["fails", "stopped"])
def test_a_failing_apply_removes_exactly_the_folders_it_made(
    tmp_path, monkeypatch, capsys, how
):
    from support.digest import changed, tree_digest

    from harness.series import apply

    patches = {**GOOD_PATCHES, "0005-bad.patch": STALE}
    make_series(tmp_path, monkeypatch, patches, GOOD_SERIES + "0005-bad.patch\n")
    if how == "stopped":

        def stopped(*args):
            raise KeyboardInterrupt

        monkeypatch.setattr(apply, "apply_series", stopped)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "kept").write_text("the user's\n")
    before = tree_digest(tmp_path)
    monkeypatch.chdir(tmp_path)
    argv = ["apply", "--target", "t", "--dest", "a/b/c/d"]
    status, line = (
        (130, "error: interrupted (Ctrl-C)")
        if how == "stopped"
        else (SeriesError.exit_code, "error: patch 0005-bad.patch from ")
    )
    assert cli.main(argv) == status
    [error] = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert error.startswith(line)
    assert changed(before, tree_digest(tmp_path)) == []
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["kept"]


def test_missing_series_file_fails_at_apply_time(tmp_path, monkeypatch, capsys):
    target = make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
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
    target = make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    (tmp_path / "out").mkdir()
    with pytest.raises(OutputError, match="already exists"):
        build_patched_tree(target, "default", tmp_path / "out")


def test_unknown_apply_method_is_refused(tmp_path, monkeypatch):
    target = make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    monkeypatch.setenv("HARNESS_APPLY_WITH", "patch")
    with pytest.raises(SeriesError, match="HARNESS_APPLY_WITH=patch is neither"):
        build_patched_tree(target, "default", tmp_path / "out")


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


@pytest.mark.hostile
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
@pytest.mark.hostile
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


def sdist_pinned_series(tmp_path, monkeypatch, version="9.9.9"):
    """Target t pinned to the sdist vllm==VERSION, with the good series."""
    patches_dir = write_tree(tmp_path / "patches", GOOD_PATCHES)
    (patches_dir / "series").write_text(GOOD_SERIES)
    source = f'{{ sdist = "vllm=={version}", sha256 = "{"0" * 64}" }}'
    use_checkout(monkeypatch, write_pins(tmp_path, target_table(source)))


def commit_all(fork, message):
    git("add", ".", cwd=fork)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message, cwd=fork)


@pytest.mark.hostile
def test_onto_a_checkout_of_another_release_is_refused_naming_it(
    tmp_path, monkeypatch, capsys
):
    sdist_pinned_series(tmp_path, monkeypatch)
    fork = make_fork(tmp_path)
    git("tag", "v9.9.8", cwd=fork)
    (fork / "NOTES").write_text("a commit of the fork\n")
    commit_all(fork, "fork")
    before = tree_files(fork)
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 7
    assert capsys.readouterr().err == (
        f"error: {fork} is vLLM 9.9.8 (tag v9.9.8, 1 commit(s) after it), but "
        f"target t is vLLM 9.9.9; check out v9.9.9, or use the target of 9.9.8 "
        f"if there is one (python -m harness targets)\n"
    )
    assert tree_files(fork) == before


@pytest.mark.hostile
def test_onto_reads_the_version_of_an_untagged_checkout_from_the_tree(
    tmp_path, monkeypatch, capsys
):
    sdist_pinned_series(tmp_path, monkeypatch)
    fork = make_fork(tmp_path)
    (fork / "vllm" / "_version.py").write_text("__version__ = version = '0.33.0'\n")
    commit_all(fork, "version")
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 7
    assert "is vLLM 0.33.0 (vllm/_version.py), but" in capsys.readouterr().err


@pytest.mark.hostile
def test_onto_reads_no_version_file_larger_than_any_is(tmp_path, monkeypatch, capsys):
    from harness.series import checkout_version

    sdist_pinned_series(tmp_path, monkeypatch)
    fork = make_fork(tmp_path)
    version = "__version__ = version = '0.33.0'\n"
    (fork / "vllm" / "_version.py").write_text(version + "#" * 1000 + "\n")
    commit_all(fork, "version")
    monkeypatch.setattr(checkout_version, "VERSION_FILE_MAX_BYTES", 1000)
    monkeypatch.setenv("HARNESS_APPLY_WITH", "git")
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 0
    assert "warning: cannot tell which vLLM" in capsys.readouterr().err


def test_onto_the_target_release_applies_and_says_which_it_found(
    tmp_path, monkeypatch, capsys
):
    sdist_pinned_series(tmp_path, monkeypatch)
    fork = make_fork(tmp_path)
    git("tag", "v9.9.9", cwd=fork)
    monkeypatch.setenv("HARNESS_APPLY_WITH", "git")
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 0
    assert f"harness: {fork} is vLLM 9.9.9 (tag v9.9.9)\n" in capsys.readouterr().err
    assert (fork / "vllm" / "events" / "ancestry.py").is_file()


@pytest.mark.hostile
def test_onto_a_checkout_of_unknown_version_is_a_warning(tmp_path, monkeypatch, capsys):
    sdist_pinned_series(tmp_path, monkeypatch)
    fork = make_fork(tmp_path)
    monkeypatch.setenv("HARNESS_APPLY_WITH", "git")
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 0
    assert (
        f"warning: cannot tell which vLLM {fork} is (no v* tag before HEAD, no "
        f"vllm/_version.py, no PKG-INFO); applying the series of vLLM 9.9.9 "
        f"anyway\n"
    ) in capsys.readouterr().err


@pytest.mark.hostile
def test_onto_a_checkout_not_based_on_the_pinned_commit_is_refused(
    tmp_path, monkeypatch, capsys
):
    fork = make_fork(tmp_path)
    pinned = git("rev-parse", "HEAD", cwd=fork).strip()
    patches_dir = write_tree(tmp_path / "patches", GOOD_PATCHES)
    (patches_dir / "series").write_text(GOOD_SERIES)
    source = f'{{ git = "{fork}", commit = "{pinned}" }}'
    use_checkout(monkeypatch, write_pins(tmp_path, target_table(source)))
    git("checkout", "-q", "--orphan", "elsewhere", cwd=fork)
    commit_all(fork, "unrelated history")
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 7
    assert capsys.readouterr().err == (
        f"error: {fork}: HEAD does not descend from commit {pinned}, the source of "
        f"target t; check out a branch based on it\n"
    )
    git("checkout", "-q", pinned, cwd=fork)
    monkeypatch.setenv("HARNESS_APPLY_WITH", "git")
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 0
