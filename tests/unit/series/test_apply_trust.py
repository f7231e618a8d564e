"""A series cannot reach outside the tree, quilt and git apply give one tree or
the input is refused, and `apply --onto` never destroys the user's work.

Each refusal is one line and status 7, whichever tool applies, and nothing
changes anywhere under the test's directory: the checkout (.git included),
the patches, the pristine tree, the cache and the temporary directory.
"""

import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
from support.digest import changed, tree_digest
from support.series import (
    GOOD_PATCHES,
    GOOD_SERIES,
    PRISTINE,
    STALE,
    git,
    make_fork,
    make_series,
    tree_files,
)
from support.stopping import checkout_prelude, start_harness, wait_for
from support.trees import diff, target_table, write_pins, write_tree

from harness import cli
from harness.series import snapshot

METHODS = [pytest.param("quilt", marks=pytest.mark.requires_quilt), "git"]

HOOK = """\
diff --git a/.git/hooks/post-commit b/.git/hooks/post-commit
new file mode 100755
--- /dev/null
+++ b/.git/hooks/post-commit
@@ -0,0 +1,2 @@
+#!/bin/sh
+touch "$HOME/pwned"
"""
# Each hostile patch, the line it is refused at, and what the line says.
HOSTILE = {
    "git-hook": (HOOK, 1, "'a/.git/hooks/post-commit': inside .git/"),
    "quoted-git-hook": (
        '--- /dev/null\n+++ "b/\\056git/hooks/post-commit"\n@@ -0,0 +1 @@\n+x\n',
        2,
        "'b/.git/hooks/post-commit': inside .git/",
    ),
    "upper-case-git": (
        diff(".GIT/config", None, "x\n"),
        2,
        "'b/.GIT/config': inside .git/",
    ),
    "dot-dot": (
        diff("../escaped.txt", None, "out\n"),
        2,
        "'b/../escaped.txt': leads out of the tree",
    ),
    "absolute": (
        "--- /dev/null\n+++ /tmp/escaped.txt\n@@ -0,0 +1 @@\n+out\n",
        2,
        "'/tmp/escaped.txt': an absolute path",
    ),
    "symlink": (
        "diff --git a/link b/link\nnew file mode 120000\n--- /dev/null\n"
        "+++ b/link\n@@ -0,0 +1 @@\n+/etc\n\\ No newline at end of file\n",
        2,
        "makes a symlink (mode 120000)",
    ),
    "set-uid": (
        "diff --git a/s.sh b/s.sh\nnew file mode 104755\n--- /dev/null\n"
        "+++ b/s.sh\n@@ -0,0 +1 @@\n+x\n",
        2,
        "mode 104755: a patch may make files 100644 or 100755 only",
    ),
    "quilt-bookkeeping": (
        diff(".pc/applied-patches", None, "x\n"),
        2,
        "inside .pc/, quilt's bookkeeping",
    ),
    "rename-into-git": (
        "diff --git a/README.md b/README.md\nrename from README.md\n"
        "rename to .git/config\n",
        3,
        "'.git/config': inside .git/",
    ),
    "binary": (
        "diff --git a/blob.bin b/blob.bin\nnew file mode 100644\n"
        "index 0000000..e69de29\nGIT binary patch\nliteral 3\n"
        "KcmZ>9%K!iX0s#O5\n\nliteral 0\nHcmV?d00001\n",
        4,
        "a binary patch: git apply applies it and quilt does not",
    ),
    "context-diff": (
        "*** /dev/null\n--- b/ctx.txt\n***************\n*** 0 ****\n--- 1 ----\n"
        "+ ctx\n",
        3,
        "a context diff: quilt applies it and git apply does not",
    ),
    "empty": (
        "",
        1,
        "names no file: quilt applies it as nothing, git apply refuses it",
    ),
    "overlapping-hunks": (
        "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-pristine\n+patched\n"
        "@@ -1 +1 @@\n-pristine\n+again\n",
        6,
        "a hunk that overlaps or comes before the one above it",
    ),
    "two-names": (
        "--- a/README.md\n+++ b/NOTES.md\n@@ -1 +1 @@\n-pristine\n+patched\n",
        2,
        "'---' and '+++' name two files (README.md, NOTES.md)",
    ),
}


def commit(fork, path: str) -> None:
    git("add", path, cwd=fork)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", path, cwd=fork)


def hostile_series(tmp_path, monkeypatch, text):
    patches = {**GOOD_PATCHES, "0005-hostile.patch": text}
    make_series(tmp_path, monkeypatch, patches, GOOD_SERIES + "0005-hostile.patch\n")
    return tmp_path / "patches" / "0005-hostile.patch"


@pytest.mark.hostile
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("where", ["--onto", "--dest"])
def test_a_patch_reaching_outside_the_tree_or_applying_by_tool_is_refused(
    tmp_path, monkeypatch, capsys, cache, temporary, method, name, where
):
    text, line, reason = HOSTILE[name]
    patch = hostile_series(tmp_path, monkeypatch, text)
    fork = make_fork(tmp_path)
    monkeypatch.setenv("HARNESS_APPLY_WITH", method)
    before = tree_digest(tmp_path)
    place = fork if where == "--onto" else tmp_path / "patched"
    assert cli.main(["apply", "--target", "t", where, str(place)]) == 7
    err = capsys.readouterr().err
    assert err.startswith(f"error: {patch}:{line}: "), err
    assert reason in err
    assert len(err.splitlines()) == 1, err
    assert changed(before, tree_digest(tmp_path)) == []
    assert not (tmp_path.parent / "escaped.txt").exists()


@pytest.mark.hostile
def test_the_lint_names_a_patch_into_git_without_a_cached_tree(
    tmp_path, monkeypatch, cache
):
    from harness.series import lint as serieslint

    patches = write_tree(tmp_path / "patches", {"0001-hook.patch": HOOK})
    (patches / "series").write_text("0001-hook.patch\n")
    write_pins(
        tmp_path, target_table(f'{{ sdist = "vllm==9.9.9", sha256 = "{"0" * 64}" }}')
    )
    findings = serieslint.lint(tmp_path)
    assert findings.skipped == ["patches/series"]
    assert (
        "patches/0001-hook.patch:1: 'a/.git/hooks/post-commit': inside .git/"
        in "\n".join(findings.errors)
    )


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("/etc/passwd", "an absolute path; a series names patches inside its own"),
        ("../outside.patch", "leads out of the patches directory"),
        ("sub/../../outside.patch", "leads out of the patches directory"),
        ("--refresh", "starts with '-', which quilt would read as an option"),
    ],
)
def test_a_series_entry_outside_its_patches_directory_is_refused(
    tmp_path, monkeypatch, capsys, cache, temporary, entry, reason
):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES + entry + "\n")
    (tmp_path / "outside.patch").write_text(diff("NOTES.md", None, "x\n"))
    (tmp_path / "patches" / "--refresh").write_text(diff("NOTES.md", None, "x\n"))
    fork = make_fork(tmp_path)
    before = tree_digest(tmp_path)
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 7
    series = tmp_path / "patches" / "series"
    err = capsys.readouterr().err
    assert err.startswith(f"error: {series}:7: {entry}: {reason}"), err
    assert len(err.splitlines()) == 1
    assert changed(before, tree_digest(tmp_path)) == []


@pytest.mark.hostile
def test_a_patch_that_is_a_link_out_of_its_directory_is_refused(
    tmp_path, monkeypatch, capsys, cache, temporary
):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES + "0005-link.patch\n")
    (tmp_path / "outside.patch").write_text(diff("NOTES.md", None, "x\n"))
    (tmp_path / "patches" / "0005-link.patch").symlink_to(tmp_path / "outside.patch")
    fork = make_fork(tmp_path)
    before = tree_digest(tmp_path)
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 7
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 'patches' / 'series'} names 0005-link.patch, which is "
        f"a link to {tmp_path / 'outside.patch'}, outside {tmp_path / 'patches'}\n"
    )
    assert changed(before, tree_digest(tmp_path)) == []


@pytest.mark.hostile
@pytest.mark.parametrize("method", METHODS)
def test_a_patch_through_a_symlink_of_the_checkout_is_refused(
    tmp_path, monkeypatch, capsys, cache, temporary, method
):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    fork = make_fork(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    (fork / "vllm" / "events").symlink_to(tmp_path / "elsewhere")
    commit(fork, ".")
    monkeypatch.setenv("HARNESS_APPLY_WITH", method)
    before = tree_digest(tmp_path)
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 7
    assert capsys.readouterr().err == (
        f"error: {fork}: vllm/events is a symlink, and the series names "
        f"vllm/events/ancestry.py; a patch may reach only the tree's own files, "
        f"through no symlink\n"
    )
    assert changed(before, tree_digest(tmp_path)) == []


# --------------------------------------------------------------------------
# The tools' environment: one tree whichever applies
# --------------------------------------------------------------------------

TOOL_SETTINGS = {
    "QUILT_PC": "elsewhere-pc",
    "QUILT_PATCH_OPTS": "--fuzz=3 --ignore-whitespace",
    "QUILT_PUSH_ARGS": "--fuzz=3",
    "QUILT_PATCHES_PREFIX": "1",
    "POSIXLY_CORRECT": "1",
    "VERSION_CONTROL": "numbered",
    "GIT_DIR": "/no-repository",
    "GIT_WORK_TREE": "/no-work-tree",
}


@pytest.mark.requires_quilt
def test_quilt_and_git_give_one_tree_whatever_their_environment(
    tmp_path, monkeypatch, cache, temporary
):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    forks = {method: make_fork(tmp_path / method) for method in ("quilt", "git")}
    for name, value in TOOL_SETTINGS.items():  # GIT_DIR names no repository
        monkeypatch.setenv(name, str(tmp_path / value) if "/" in value else value)
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text("[apply]\n\tignoreWhitespace = change\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    trees = {}
    for method in ("quilt", "git"):
        monkeypatch.setenv("HARNESS_APPLY_WITH", method)
        dest = tmp_path / f"by-{method}"
        assert cli.main(["apply", "--target", "t", "--dest", str(dest)]) == 0
        trees[method] = tree_files(dest)
        fork = forks[method]
        assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 0
        assert tree_files(fork / "vllm") == tree_files(dest / "vllm")
        assert not list(tmp_path.rglob("elsewhere-pc"))
        assert not (fork / ".pc").exists()
    assert trees["quilt"] == trees["git"]


@pytest.mark.hostile
@pytest.mark.parametrize("method", METHODS)
def test_a_whitespace_change_is_refused_whatever_gits_configuration(
    tmp_path, monkeypatch, capsys, cache, temporary, method
):
    pool = PRISTINE["vllm/block_pool.py"]
    spaced = diff(
        "vllm/block_pool.py",
        pool.replace("line 3\n", "line  3\n"),
        pool.replace("line 3\n", "line three\n"),
    )
    make_series(
        tmp_path, monkeypatch, {"0001-spaced.patch": spaced}, "0001-spaced.patch\n"
    )
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text("[apply]\n\tignoreWhitespace = change\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("QUILT_PATCH_OPTS", "--ignore-whitespace")
    monkeypatch.setenv("HARNESS_APPLY_WITH", method)
    fork = make_fork(tmp_path)
    before = tree_digest(tmp_path)
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 7
    assert "error: patch 0001-spaced.patch from" in capsys.readouterr().err
    assert changed(before, tree_digest(tmp_path)) == []


@pytest.mark.hostile
@pytest.mark.parametrize("method", METHODS)
def test_a_checkout_that_converts_line_endings_is_refused_by_both_tools(
    tmp_path, monkeypatch, capsys, cache, temporary, method
):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    fork = make_fork(tmp_path)
    (fork / ".gitattributes").write_text("*.py text eol=crlf\n")
    commit(fork, ".gitattributes")
    (fork / "vllm" / "block_pool.py").unlink()
    git("checkout", "--", "vllm/block_pool.py", cwd=fork)  # now with CRLF
    assert b"\r\n" in (fork / "vllm" / "block_pool.py").read_bytes()
    monkeypatch.setenv("HARNESS_APPLY_WITH", method)
    before = tree_digest(tmp_path)
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 7
    err = capsys.readouterr().err
    err = err[err.index("error: ") :]
    assert err.startswith("error: patch 0001-emit-parent.patch from"), err
    assert err.rstrip().endswith(
        f"{fork}: vllm/block_pool.py hold(s) CRLF line endings (a "
        f".gitattributes eol or core.autocrlf setting?); the series is made "
        f"against LF files"
    )
    assert changed(before, tree_digest(tmp_path)) == []


# --------------------------------------------------------------------------
# The user's work while the series applies
# --------------------------------------------------------------------------

# A stand-in for quilt or git that runs the real tool, then, after the step
# that names $HARNESS_TEST_WAIT_ON, says so and waits for $HARNESS_TEST_GO.
SLOW_TOOL = """\
#!/bin/sh
{real} "$@"
status=$?
case " $* " in
  *" --check "*) ;;
  *"$HARNESS_TEST_WAIT_ON"*)
    touch "$HARNESS_TEST_READY"
    waited=0
    while [ ! -e "$HARNESS_TEST_GO" ] && [ $waited -lt 2400 ]; do
      sleep 0.05; waited=$((waited + 1))
    done ;;
esac
exit $status
"""


def slow_apply(tmp_path, method, fork):
    """`apply --onto fork` with a slow tool, waiting after 0002."""
    tool = "quilt" if method == "quilt" else "git"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / tool).write_text(SLOW_TOOL.format(real=shutil.which(tool)))
    (bin_dir / tool).chmod(0o755)
    ready, go = tmp_path / "ready", tmp_path / "go"
    process = start_harness(
        ["apply", "--target", "t", "--onto", str(fork)],
        prelude=checkout_prelude(tmp_path),
        env={
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "HARNESS_APPLY_WITH": method,
            "TMPDIR": str(tmp_path / "tmp"),
            "HARNESS_TEST_WAIT_ON": "0002-add-module.patch",
            "HARNESS_TEST_READY": str(ready),
            "HARNESS_TEST_GO": str(go),
        },
    )
    wait_for(ready, process)
    return process, go


@pytest.mark.parametrize("method", METHODS)
def test_work_done_in_the_checkout_while_a_failing_series_applies_stays(
    tmp_path, monkeypatch, cache, temporary, method
):
    patches = {**GOOD_PATCHES, "0005-bad.patch": STALE}
    make_series(tmp_path, monkeypatch, patches, GOOD_SERIES + "0005-bad.patch\n")
    fork = make_fork(tmp_path)
    process, go = slow_apply(tmp_path, method, fork)
    (fork / "mine.txt").write_text("my new file\n")
    (fork / "tests" / "test_pool.py").write_text("my edit\n")
    go.touch()
    out, err = process.communicate(timeout=60)
    assert process.returncode == 7, err
    assert "\nerror: patch 0005-bad.patch from" in err
    assert (fork / "mine.txt").read_text() == "my new file\n"
    assert (fork / "tests" / "test_pool.py").read_text() == "my edit\n"
    assert git("status", "--porcelain", cwd=fork).splitlines() == [
        " M tests/test_pool.py",
        "?? mine.txt",
    ]
    assert list(temporary.iterdir()) == []


@pytest.mark.parametrize("method", METHODS)
def test_a_file_the_series_patches_edited_meanwhile_is_never_overwritten(
    tmp_path, monkeypatch, cache, temporary, method
):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    fork = make_fork(tmp_path)
    process, go = slow_apply(tmp_path, method, fork)
    (fork / "README.md").write_text("my edit of a file 0004 patches\n")
    (fork / "mine.txt").write_text("my new file\n")
    before = tree_digest(fork)
    go.touch()
    out, err = process.communicate(timeout=60)
    assert process.returncode == 7, err
    assert err.splitlines()[-1] == (
        f"error: {fork}: README.md changed while the series applied, not by the "
        f"harness; nothing was written, and the changes are left as they are"
    )
    assert changed(before, tree_digest(fork)) == []


def watch_writes(monkeypatch, fork, on_write) -> list:
    """The files written into fork, in order; ``on_write(writes)`` runs
    before each is written (it may raise, or send a signal)."""
    real_write = snapshot._write
    writes = []

    def write(file, state, *rest):
        if fork in file.parents:
            writes.append(file)
            on_write(writes)
        real_write(file, state, *rest)

    monkeypatch.setattr(snapshot, "_write", write)
    return writes


@pytest.mark.hostile
def test_a_write_that_fails_midway_puts_the_checkout_back(
    tmp_path, monkeypatch, capsys, cache, temporary
):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    fork = make_fork(tmp_path)
    monkeypatch.setenv("HARNESS_APPLY_WITH", "git")

    def third_fails(writes):
        if len(writes) == 3:
            raise OSError(28, "No space left on device", str(writes[-1]))

    writes = watch_writes(monkeypatch, fork, third_fails)
    before = tree_digest(tmp_path)
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 11
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"error: cannot write the patched files into {fork}: No space left on "
        f"device ({writes[2]}); it is as it was"
    )
    assert changed(before, tree_digest(tmp_path)) == []


@pytest.mark.hostile
def test_a_stop_while_the_files_are_written_waits_then_puts_them_back(
    tmp_path, monkeypatch, capsys, cache, temporary, ctrl_c
):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    fork = make_fork(tmp_path)
    monkeypatch.setenv("HARNESS_APPLY_WITH", "git")
    # Each write sends SIGINT, held until every file is written.
    writes = watch_writes(
        monkeypatch, fork, lambda writes: os.kill(os.getpid(), signal.SIGINT)
    )
    before = tree_digest(tmp_path)
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == "error: interrupted (Ctrl-C)"
    assert len(writes) == 3  # all three files written, then their originals back
    assert changed(before, tree_digest(tmp_path)) == []


@pytest.mark.hostile
@pytest.mark.parametrize("method", METHODS)
def test_an_ignored_file_whose_name_is_not_utf8_is_left_alone(
    tmp_path, monkeypatch, cache, temporary, method
):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    fork = make_fork(tmp_path)
    (fork / ".gitignore").write_text("*.o\n")
    commit(fork, ".gitignore")
    odd = fork / os.fsdecode(b"caf\xe9.o")
    odd.write_bytes(b"built")
    monkeypatch.setenv("HARNESS_APPLY_WITH", method)
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 0
    assert odd.read_bytes() == b"built"
    assert (fork / "vllm" / "events" / "ancestry.py").read_text() == "FILLED = 1\n"


def test_git_reads_the_checkout_without_taking_its_index_lock(
    tmp_path, monkeypatch, cache, temporary
):
    # git status refreshes the index under .git/index.lock unless told not
    # to; stopped with the harness (SIGKILL), it would leave the lock behind
    # and the user's next git command would fail.
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    fork = make_fork(tmp_path)
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(
        f'#!/bin/sh\necho "$GIT_OPTIONAL_LOCKS $*" >> {calls}\n'
        f'exec {shutil.which("git")} "$@"\n'
    )
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("HARNESS_APPLY_WITH", "git")
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 0
    in_checkout = [
        line for line in calls.read_text().splitlines() if f"-C {fork} " in line
    ]
    assert any(" status " in line for line in in_checkout)
    assert all(line.startswith("0 ") for line in in_checkout), in_checkout


@pytest.mark.hostile
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("where", ["--onto", "--dest"])
def test_a_patch_creating_a_file_the_tree_has_is_refused(
    tmp_path, monkeypatch, capsys, cache, temporary, method, where
):
    # quilt writes into an empty file that a patch "creates"; git apply
    # refuses: the tree would depend on the tool.
    creates = diff("tests/test_pool.py", None, "def test_new():\n    pass\n")
    patch = hostile_series(tmp_path, monkeypatch, creates)
    fork = make_fork(tmp_path)
    (tmp_path / "pristine" / "tests" / "test_pool.py").write_text("")
    (fork / "tests" / "test_pool.py").write_text("")
    commit(fork, ".")
    monkeypatch.setenv("HARNESS_APPLY_WITH", method)
    before = tree_digest(tmp_path)
    place = fork if where == "--onto" else tmp_path / "patched"
    assert cli.main(["apply", "--target", "t", where, str(place)]) == 7
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"error: {patch} creates tests/test_pool.py, which the tree already has "
        f"there: quilt would write into it and git apply refuses it; the patch "
        f"must modify it instead"
    )
    assert changed(before, tree_digest(tmp_path)) == []


def test_a_file_deleted_then_created_again_by_the_series_applies(
    tmp_path, monkeypatch, cache, temporary
):
    again = diff("vllm/old.py", None, "reborn = True\n")
    patch_set = {**GOOD_PATCHES, "0005-again.patch": again}
    make_series(tmp_path, monkeypatch, patch_set, GOOD_SERIES + "0005-again.patch\n")
    fork = make_fork(tmp_path)
    monkeypatch.setenv("HARNESS_APPLY_WITH", "git")
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 0
    assert (fork / "vllm" / "old.py").read_text() == "reborn = True\n"


def originals_left(fork) -> list:
    return list(fork.rglob(f"{snapshot.ORIGINAL}*"))


@pytest.mark.hostile
def test_a_filesystem_that_fills_up_midway_is_put_back_without_a_byte_written(
    tmp_path, monkeypatch, capsys, cache, temporary
):
    """ENOSPC from the second file on, for every write after it too: the
    checkout is put back by renames, which need no space."""
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    fork = make_fork(tmp_path)
    monkeypatch.setenv("HARNESS_APPLY_WITH", "git")

    def full_from_the_second(writes):
        if len(writes) >= 2:
            raise OSError(28, "No space left on device", str(writes[-1]))

    writes = watch_writes(monkeypatch, fork, full_from_the_second)
    before = tree_digest(tmp_path)
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 11
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines()[-1] == (
        f"error: cannot write the patched files into {fork}: No space left on "
        f"device ({writes[1]}); it is as it was"
    )
    assert len(writes) == 2  # the second failed, and nothing was written after
    assert changed(before, tree_digest(tmp_path)) == []
    assert originals_left(fork) == []


@pytest.mark.hostile
def test_a_read_only_checkout_is_one_line_and_nothing_is_written(
    tmp_path, monkeypatch, capsys, cache, temporary
):
    """EROFS for every file made in the checkout (a read-only mount)."""
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    fork = make_fork(tmp_path)
    monkeypatch.setenv("HARNESS_APPLY_WITH", "git")
    real_mkstemp = tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):
        if dir is not None and fork in (Path(dir), *Path(dir).parents):
            raise OSError(30, "Read-only file system", str(Path(dir) / "x"))
        return real_mkstemp(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    before = tree_digest(tmp_path)
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 11
    err = capsys.readouterr().err
    assert "Traceback" not in err
    [line] = [line for line in err.splitlines() if line.startswith("error: ")]
    assert line.startswith(
        f"error: cannot write the patched files into {fork}: Read-only file "
        f"system ({fork}/"
    )
    assert line.endswith("; it is as it was")
    assert changed(before, tree_digest(tmp_path)) == []


@pytest.mark.hostile
def test_a_rename_into_place_that_fails_puts_the_original_back(
    tmp_path, monkeypatch, capsys, cache, temporary
):
    """The new bytes are whole and the original set aside, then the rename
    of the new file fails: the original is renamed back."""
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    fork = make_fork(tmp_path)
    monkeypatch.setenv("HARNESS_APPLY_WITH", "git")
    real_rename = os.rename
    renamed_into_fork = []

    def rename(source, target):
        if (
            Path(target).parent != Path(source).parent
            or fork not in Path(target).parents
            or snapshot.ORIGINAL in Path(target).name
        ):
            return real_rename(source, target)
        renamed_into_fork.append(target)
        if len(renamed_into_fork) == 2:
            raise OSError(5, "Input/output error", str(target))
        return real_rename(source, target)

    monkeypatch.setattr(os, "rename", rename)
    before = tree_digest(tmp_path)
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 11
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"error: cannot write the patched files into {fork}: Input/output error "
        f"({renamed_into_fork[1]}); it is as it was"
    )
    assert changed(before, tree_digest(tmp_path)) == []
    assert originals_left(fork) == []


@pytest.mark.hostile
def test_the_run_after_one_killed_while_writing_says_how_to_put_originals_back(
    tmp_path, monkeypatch, capsys, cache, temporary
):
    """A SIGKILL between setting an original aside and removing it leaves
    the patched file and its original beside it."""
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    fork = make_fork(tmp_path)
    monkeypatch.setenv("HARNESS_APPLY_WITH", "git")
    readme = fork / "README.md"
    aside = readme.with_name(f"{snapshot.ORIGINAL}4242-0badf00d")
    readme.rename(aside)
    readme.write_text("patched\n")
    assert cli.main(["apply", "--target", "t", "--onto", str(fork)]) == 7
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"error: {fork} has uncommitted changes ( M README.md; ?? {aside.name}); "
        f"commit or stash them first; 1 {snapshot.ORIGINAL}* file(s) among them "
        f"({aside.name}) are originals an apply --onto set aside and was killed "
        f"before putting back: each is the file beside it as it was before; move "
        f"each back over that file, and remove the files the series added"
    )
