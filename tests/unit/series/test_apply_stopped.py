"""apply stopped midway (Ctrl-C, SIGTERM, SIGKILL) leaves nothing half-done.

A stand-in for quilt or git on PATH runs the real tool, then, after the step
that pushes 0002-add-module.patch, says so and waits: the signal lands with
two patches applied (and quilt's .pc stack written) out of four.
"""

import os
import shutil
import signal

import pytest
from support.series import (
    GOOD_PATCHES,
    GOOD_SERIES,
    git,
    make_fork,
    make_series,
    tree_files,
)
from support.stopping import (
    checkout_prelude,
    end_group,
    is_running,
    start_harness,
    stop,
    wait_for,
)

from harness import cli

WAIT_ON = "0002-add-module.patch"
# Runs the real tool; after the step whose arguments name $HARNESS_TEST_WAIT_ON
# (not a `--check`), notes its pid, says it is ready, and waits for
# $HARNESS_TEST_GO (two minutes at most).
STAND_IN = """\
#!/bin/sh
{real} "$@"
status=$?
case " $* " in
  *" --check "*) ;;
  *"$HARNESS_TEST_WAIT_ON"*)
    echo $$ > "$HARNESS_TEST_PID"
    touch "$HARNESS_TEST_READY"
    waited=0  # at most 120 s, should a test fail before it goes on
    while [ ! -e "$HARNESS_TEST_GO" ] && [ $waited -lt 2400 ]; do
      sleep 0.05; waited=$((waited + 1))
    done ;;
esac
exit $status
"""
STOPS = [
    pytest.param(signal.SIGINT, 130, "error: interrupted (Ctrl-C)", id="SIGINT"),
    pytest.param(signal.SIGTERM, 143, "error: terminated (SIGTERM)", id="SIGTERM"),
]
METHODS = [pytest.param("quilt", marks=pytest.mark.requires_quilt), "git"]


def every_file(root):
    """Every file under root but git's own, with its bytes (.pc included)."""
    return {
        name: data for name, data in tree_files(root).items() if ".git/" not in name
    }


def start_waiting_apply(tmp_path, method, where):
    tool = "quilt" if method == "quilt" else "git"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / tool
    stand_in.write_text(STAND_IN.format(real=shutil.which(tool)))
    stand_in.chmod(0o755)
    files = {name: tmp_path / name for name in ("ready", "pid", "go")}
    (tmp_path / "tmp").mkdir()
    process = start_harness(
        ["apply", "--target", "t", *where],
        prelude=checkout_prelude(tmp_path),
        env={
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "HARNESS_APPLY_WITH": method,
            "TMPDIR": str(tmp_path / "tmp"),
            "HARNESS_TEST_WAIT_ON": WAIT_ON,
            "HARNESS_TEST_READY": str(files["ready"]),
            "HARNESS_TEST_PID": str(files["pid"]),
            "HARNESS_TEST_GO": str(files["go"]),
        },
    )
    wait_for(files["ready"], process)
    return process, int(files["pid"].read_text()), files


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(("signum", "status", "line"), STOPS)
def test_a_stopped_onto_never_wrote_to_the_checkout(
    tmp_path, monkeypatch, method, signum, status, line
):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    fork = make_fork(tmp_path)
    (fork / "build").mkdir()
    (fork / "build" / "ignored.o").write_bytes(b"\x00built")
    (fork / ".gitignore").write_text("build/\n")
    git("add", ".gitignore", cwd=fork)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "i", cwd=fork)
    before = every_file(fork)
    process, tool_pid, _ = start_waiting_apply(tmp_path, method, ["--onto", str(fork)])
    [copy] = (tmp_path / "tmp").iterdir()  # two patches applied there, of four
    assert (copy / "tree" / "vllm" / "events" / "ancestry.py").is_file()
    assert every_file(fork) == before, "the series is applied to a copy first"
    result = stop(process, signum)
    assert result.returncode == status, result.stderr
    assert result.stderr.splitlines()[-1] == line
    assert every_file(fork) == before
    assert not (fork / ".pc").exists()
    assert list((tmp_path / "tmp").iterdir()) == []
    assert not is_running(tool_pid), f"{method} outlived the harness"


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(("signum", "status", "line"), STOPS)
def test_a_stopped_dest_build_leaves_nothing(
    tmp_path, monkeypatch, method, signum, status, line
):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    dest = tmp_path / "out" / "patched"
    process, tool_pid, _ = start_waiting_apply(tmp_path, method, ["--dest", str(dest)])
    result = stop(process, signum)
    assert result.returncode == status, result.stderr
    assert result.stderr.splitlines()[-1] == line
    assert not (tmp_path / "out").exists()  # the folder it made goes too
    assert not is_running(tool_pid)


def test_what_a_killed_dest_build_leaves_is_swept_by_the_next_run(
    tmp_path, monkeypatch, capsys
):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    dest = tmp_path / "out" / "patched"
    process, tool_pid, _ = start_waiting_apply(tmp_path, "git", ["--dest", str(dest)])
    process.kill()
    process.communicate()
    end_group(tool_pid)
    [left] = (tmp_path / "out").iterdir()
    assert left.name.startswith(".harness-scratch-apply-")
    monkeypatch.setenv("HARNESS_APPLY_WITH", "git")
    assert cli.main(["apply", "--target", "t", "--dest", str(dest)]) == 0
    assert sorted((tmp_path / "out").iterdir()) == [dest]
    assert (
        f"harness: removed {left}, left behind by an earlier run that was killed\n"
        in capsys.readouterr().err
    )


def test_the_loser_of_two_applies_to_one_dest_says_so(tmp_path, monkeypatch, capsys):
    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    dest = tmp_path / "out" / "patched"
    process, _, files = start_waiting_apply(tmp_path, "git", ["--dest", str(dest)])
    monkeypatch.setenv("HARNESS_APPLY_WITH", "git")
    assert cli.main(["apply", "--target", "t", "--dest", str(dest)]) == 0
    winner = every_file(dest)
    files["go"].touch()
    out, err = process.communicate(timeout=60)
    assert process.returncode == 11, err
    assert err.splitlines()[-1] == (
        f"error: {dest} was made by another run while this one worked; left it "
        f"as it is (this run's tree is removed)"
    )
    assert every_file(dest) == winner
    assert sorted((tmp_path / "out").iterdir()) == [dest]
