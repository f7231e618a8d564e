"""`export` refuses what it cannot do before any work, and leaves nothing
behind when it is stopped."""

import errno
import os
import shutil
import signal
import tempfile

import pytest
from support.export import SUBMITTER, make_target
from support.stopping import checkout_prelude, end_group, start_harness, stop, wait_for

from harness import cli
from harness.errors import OutputError, SubmitterError
from harness.submission.submitter import PROJECT_IDENTITIES

REVIEWED = "--i-reviewed-every-line"


@pytest.fixture
def target(tmp_path, monkeypatch, cache):
    """Target t, git's global configuration empty, scratch in tmp_path/tmp."""
    config = tmp_path / "gitconfig"
    config.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    return make_target(tmp_path, monkeypatch)


def export(out, *options):
    argv = ["export", "--target", "t", "--out", str(out), "--no-fail-before-fix"]
    return cli.main([*argv, *options])


def assert_refused_before_any_work(capsys, out, code, message):
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith("error: ")
    assert message in err.splitlines()[-1]
    assert "harness: copying" not in err
    assert "Traceback" not in err
    assert not out.exists()
    assert code in (SubmitterError.exit_code, OutputError.exit_code)


@pytest.mark.parametrize(
    ("options", "config", "message"),
    [
        (["--as", SUBMITTER], "", f"confirm it with {REVIEWED}"),
        ([REVIEWED], "", "no submitter identity"),
        (
            [REVIEWED],
            "[user]\n\tname = {0.name}\n\temail = {0.email}\n".format(
                PROJECT_IDENTITIES[0]
            ),
            "this project's placeholder identity, not a person",
        ),
        ([REVIEWED, "--as", "jane@example.org"], "", "which is not 'Name <email>'"),
    ],
    ids=["not-reviewed", "no-identity", "placeholder-from-git", "malformed"],
)
def test_no_person_to_sign_off_is_refused_before_any_work(
    tmp_path, target, capsys, options, config, message
):
    (tmp_path / "gitconfig").write_text(config)
    code = export(tmp_path / "out", *options)
    assert code == SubmitterError.exit_code
    assert_refused_before_any_work(capsys, tmp_path / "out", code, message)


def test_gits_identity_is_the_submitter_without_as(tmp_path, target, capsys):
    (tmp_path / "gitconfig").write_text(
        "[user]\n\tname = Jane Doe\n\temail = jane@doe.name\n"
    )
    assert export(tmp_path / "out", REVIEWED) == 0
    assert f"submitting as {SUBMITTER}" in capsys.readouterr().err
    mail = next((tmp_path / "out").glob("0001-*.patch")).read_text()
    assert f"From: {SUBMITTER}\n" in mail


def test_an_out_that_cannot_be_made_is_refused_before_any_work(
    tmp_path, target, capsys
):
    (tmp_path / "file").write_text("not a directory\n")
    out = tmp_path / "file" / "out"
    code = export(out, "--as", SUBMITTER, REVIEWED)
    assert code == OutputError.exit_code
    assert_refused_before_any_work(
        capsys, out, code, f"cannot make {out}: {out.parent} is not a directory"
    )


@pytest.mark.hostile
def test_a_read_only_filesystem_is_refused_before_any_work(
    tmp_path, target, capsys, monkeypatch
):
    # Running as root defeats permission bits, so the file system's answer to
    # making a directory next to --out is the one injected here.
    make_directory = tempfile.mkdtemp

    def read_only(prefix=None, dir=None):
        if dir is not None and str(dir).startswith(str(tmp_path / "ro")):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), dir)
        return make_directory(prefix=prefix, dir=dir)

    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    (tmp_path / "ro").mkdir()
    out = tmp_path / "ro" / "out"
    code = export(out, "--as", SUBMITTER, REVIEWED)
    assert code == OutputError.exit_code
    assert_refused_before_any_work(capsys, out, code, "Read-only file system")


# A git that stops for two minutes at most at format-patch, after the scratch
# is made (support.stopping waits for the file it makes).
SLOW_GIT = """\
#!/bin/sh
for arg in "$@"; do
  if [ "$arg" = format-patch ]; then touch "$HARNESS_TEST_READY"; exec sleep 120; fi
done
exec {git} "$@"
"""


def start_export(tmp_path, out, slow=True):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "git").write_text(SLOW_GIT.format(git=shutil.which("git")))
    (bin_dir / "git").chmod(0o755)
    argv = ["export", "--target", "t", "--out", str(out), "--as", SUBMITTER]
    env = {
        "TMPDIR": str(tmp_path / "tmp"),
        "HARNESS_TEST_READY": str(tmp_path / "ready"),
    }
    if slow:
        env["PATH"] = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    return start_harness(
        [*argv, REVIEWED, "--no-fail-before-fix"], checkout_prelude(tmp_path), env
    )


def scratch_left(tmp_path):
    return sorted(
        path.name
        for parent in (tmp_path / "tmp", tmp_path / "outs")
        if parent.exists()
        for path in parent.iterdir()
        if path.name != "out"
    )


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("signum", "message"),
    [
        (signal.SIGTERM, "error: terminated (SIGTERM)"),
        (signal.SIGINT, "error: interrupted"),
    ],
    ids=["sigterm", "sigint"],
)
def test_a_stopped_export_leaves_nothing_behind(tmp_path, target, signum, message):
    out = tmp_path / "outs" / "out"
    process = start_export(tmp_path, out)
    try:
        wait_for(tmp_path / "ready", process)
        assert len(scratch_left(tmp_path)) == 2  # the scratch tree, the staging
        stopped = stop(process, signum)
    finally:
        process.kill()
    assert stopped.returncode == 128 + signum
    assert message in stopped.stderr
    assert "Traceback" not in stopped.stderr
    assert scratch_left(tmp_path) == []
    assert not out.exists()


@pytest.mark.hostile
def test_a_killed_exports_scratch_is_swept_by_the_next_one_line_each(tmp_path, target):
    out = tmp_path / "outs" / "out"
    process = start_export(tmp_path, out)
    try:
        wait_for(tmp_path / "ready", process)
        process.kill()
        process.communicate(timeout=60)
    finally:
        end_group(process.pid)
    left = scratch_left(tmp_path)
    assert len(left) == 2
    assert all(f".harness-scratch-export-{process.pid}-" in name for name in left)

    again = start_export(tmp_path, out, slow=False)
    _, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    swept = [line for line in err.splitlines() if "was killed" in line]
    assert len(swept) == 2
    assert all(line.startswith("harness: removed ") for line in swept)
    assert scratch_left(tmp_path) == []
    assert (out / "pr-body.md").is_file()


@pytest.mark.parametrize("patches", ["x", "0", "3-2", "1-y"])
def test_a_patches_option_that_names_no_range_is_a_usage_error(
    tmp_path, target, capsys, patches
):
    with pytest.raises(SystemExit) as stopped:
        export(tmp_path / "out", "--as", SUBMITTER, REVIEWED, "--patches", patches)
    assert stopped.value.code == 2
    assert f"--patches: {patches!r} is not" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("text", "found"), [("3", (3, 3)), ("1-3", (1, 3)), ("2-", (2, None))]
)
def test_a_patches_option_is_first_and_last(text, found):
    from harness.verbs.export import patch_range

    assert patch_range(text) == found


def test_a_relative_out_is_taken_from_the_directory_export_runs_in(
    tmp_path, target, capsys, monkeypatch
):
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert export("rel/out", "--as", SUBMITTER, REVIEWED) == 0
    out = tmp_path / "elsewhere" / "rel" / "out"
    assert (out / "pr-body.md").is_file()
    said = capsys.readouterr()
    assert f"--body-file {out / 'pr-body.md'}" in said.out
    # the long phases say what they do
    assert "harness: committing it in a scratch repository" in said.err
    assert "harness: writing the mails and pr-body.md" in said.err


@pytest.mark.hostile
@pytest.mark.parametrize("where", ["cache", "cache-trees", "pristine"])
def test_an_out_inside_the_cache_or_the_pristine_tree_is_refused(
    tmp_path, target, capsys, cache, where
):
    inside = {
        "cache": cache / "out",
        "cache-trees": cache / "trees" / "vllm-0.33.0" / "mails",
        "pristine": tmp_path / "pristine" / "mails",
    }[where]
    cache.mkdir(exist_ok=True)
    before = sorted(path for path in tmp_path.rglob("*") if "tmp" not in path.parts)
    code = export(inside, "--as", SUBMITTER, REVIEWED)
    assert code == OutputError.exit_code
    owner = "the harness cache" if where != "pristine" else "the pristine tree"
    assert_refused_before_any_work(capsys, inside, code, f"lies inside {owner}")
    after = sorted(path for path in tmp_path.rglob("*") if "tmp" not in path.parts)
    assert after == before


@pytest.mark.hostile
@pytest.mark.parametrize(
    "signum", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"]
)
def test_a_stopped_export_removes_the_folders_it_made_for_out(tmp_path, target, signum):
    out = tmp_path / "new" / "a" / "b" / "out"
    process = start_export(tmp_path, out)
    try:
        wait_for(tmp_path / "ready", process)
        assert (tmp_path / "new" / "a" / "b").is_dir()
        stopped = stop(process, signum)
    finally:
        process.kill()
    assert stopped.returncode == 128 + signum
    assert "Traceback" not in stopped.stderr
    assert not (tmp_path / "new").exists()


@pytest.mark.hostile
@pytest.mark.parametrize(
    "parts", [("x" * 300,), ("y" * 250,) * 20], ids=["NAME_MAX", "PATH_MAX"]
)
def test_an_out_too_long_to_be_made_is_one_line(tmp_path, target, capsys, parts):
    out = tmp_path.joinpath(*parts)
    before = sorted(path.name for path in tmp_path.iterdir())
    assert export(out, "--as", SUBMITTER, REVIEWED) == OutputError.exit_code
    err = capsys.readouterr().err
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: cannot make {'--out ' * (len(parts) > 1)}")
    assert line.endswith(
        "File name too long"
        if len(parts) == 1
        else f"the path is {len(str(out))} bytes long, and the system takes "
        f"paths under 4096"
    )
    assert "Traceback" not in err
    assert sorted(path.name for path in tmp_path.iterdir()) == before


@pytest.mark.hostile
def test_a_relative_out_with_the_working_directory_removed_is_one_line(
    tmp_path, target, capsys, monkeypatch
):
    (tmp_path / "gone").mkdir()
    monkeypatch.chdir(tmp_path / "gone")
    (tmp_path / "gone").rmdir()
    assert export("rel/out", "--as", SUBMITTER, REVIEWED) == OutputError.exit_code
    assert capsys.readouterr().err.splitlines()[-1] == (
        "error: --out rel/out is relative, and the working directory it would be "
        "taken from cannot be read (No such file or directory: removed?); give "
        "an absolute path, or run from a directory that exists"
    )


@pytest.mark.hostile
@pytest.mark.parametrize("where", ["cache", "pristine"])
def test_an_out_in_a_directory_mounted_from_the_cache_or_the_tree_is_refused(
    tmp_path, target, capsys, monkeypatch, cache, where
):
    """MOUNT a bind mount (root only) of a directory of the cache or of the
    pristine tree: the same device and inode, which no link shows."""
    source = {"cache": cache / "trees", "pristine": tmp_path / "pristine"}[where]
    source.mkdir(parents=True, exist_ok=True)
    (tmp_path / "MOUNT").mkdir()
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        mounted = os.fspath(path) == os.fspath(tmp_path / "MOUNT")
        return real_stat(source if mounted else path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    out = tmp_path / "MOUNT" / "mails"
    code = export(out, "--as", SUBMITTER, REVIEWED)
    assert code == OutputError.exit_code
    owner = "the harness cache" if where == "cache" else "the pristine tree"
    assert_refused_before_any_work(capsys, out, code, f"lies inside {owner}")
