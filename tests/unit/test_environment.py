"""The environment a verb runs in, however odd, ends it with one line and its
own status: stdout closed or full, a file name that is not UTF-8, a program
missing from PATH, a stop signal that lands as the harness exits, an error
that would quote megabytes."""

import errno
import io
import os
import signal
import subprocess
import sys

import pytest
from support import REPO_ROOT

from harness import cli, errors, processes


def run_harness(*args, **options) -> subprocess.CompletedProcess:
    options.setdefault("stderr", subprocess.PIPE)
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], cwd=REPO_ROOT, timeout=60, **options
    )


@pytest.mark.hostile
def test_a_closed_stdout_ends_the_verb_as_a_closed_pipe_does():
    result = run_harness(
        "targets", stdout=subprocess.DEVNULL, preexec_fn=lambda: os.close(1)
    )
    assert result.returncode == 141
    assert result.stderr == b""


@pytest.mark.hostile
def test_a_closed_stdout_is_never_reused_for_a_file_the_harness_opens(tmp_path):
    probe = (
        "import os, sys\n"
        "from harness import cli\n"
        "cli._guard_standard_streams()\n"
        f"descriptor = os.open({str(tmp_path / 'f')!r}, os.O_CREAT | os.O_WRONLY)\n"
        "sys.stderr.write(str(descriptor))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(1),
        text=True,
    )
    assert int(result.stderr) > 2


@pytest.mark.hostile
def test_a_full_stdout_is_one_line_and_status_11():
    with open("/dev/full", "w") as full:
        result = run_harness("targets", stdout=full)
    assert result.returncode == errors.OutputError.exit_code
    assert result.stderr == (
        b"error: cannot write the output to stdout: No space left on device\n"
    )


@pytest.mark.hostile
def test_a_file_name_that_is_not_utf8_is_printed_as_its_bytes(tmp_path):
    name = os.fsencode(tmp_path) + b"/\xff-capture.bin"
    open(name, "wb").close()
    result = subprocess.run(
        [sys.executable, "-m", "harness", "check-stream", name],
        cwd=REPO_ROOT,
        capture_output=True,
        env={**os.environ, "PYTHONIOENCODING": "utf-8", "LC_ALL": "C.UTF-8"},
        timeout=60,
    )
    assert result.returncode == errors.IncompleteStream.exit_code
    assert result.stdout.startswith(name + b": 0 batches, 0 events")
    assert result.stderr.count(b"\n") == 1
    assert result.stderr.startswith(b"error: ")


def test_a_program_missing_from_path_is_one_line(monkeypatch, tmp_path):
    with pytest.raises(errors.MissingDependency) as raised:
        processes.run(["no-such-program-here", "--version"])
    assert str(raised.value) == (
        "no-such-program-here is not on PATH; install it or fix PATH (README.md, "
        "Prerequisites)"
    )
    with pytest.raises(FileNotFoundError):  # a missing directory stays itself
        processes.run(["git", "--version"], cwd=tmp_path / "missing")


@pytest.mark.hostile
def test_output_that_is_not_utf8_reaches_the_harness_as_surrogates():
    result = processes.run([sys.executable, "-c", "import os; os.write(1, b'\\xff')"])
    assert result.stdout == "\udcff"


@pytest.mark.parametrize(
    "args",
    [
        ["apply", "--target", "main", "--onto", "."],
        ["export", "--target", "main", "--out", "x", "--i-reviewed-every-line"],
    ],
    ids=["apply-onto", "export"],
)
def test_git_missing_from_path_is_one_line_before_any_work(
    args, monkeypatch, tmp_path, capsys
):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert cli.main(args) == errors.MissingDependency.exit_code
    err = capsys.readouterr().err
    assert err.startswith("error: git is not on PATH, and "), err
    assert err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def run_as_module(prelude: str, signum: int) -> subprocess.CompletedProcess:
    """`python -m harness targets`, after ``prelude``, with ``signum`` acting
    as under a terminal."""
    script = (
        f"{prelude}\nimport runpy, sys\nsys.argv = ['harness', 'targets']\n"
        "runpy.run_module('harness', run_name='__main__')\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        preexec_fn=lambda: signal.signal(signum, signal.SIG_DFL),
        timeout=60,
    )


@pytest.mark.hostile
def test_a_stop_signal_as_the_harness_exits_leaves_the_verbs_status():
    # The signal lands while the interpreter exits, after main returned: as
    # it did once in eight runs of `fetch`, which then died by SIGINT.
    result = run_as_module(
        "import atexit, os, signal\n"
        "atexit.register(lambda: os.kill(os.getpid(), signal.SIGINT))",
        signal.SIGINT,
    )
    assert result.returncode == 0, result.stderr
    assert b"main" in result.stdout


@pytest.mark.hostile
def test_an_error_quotes_at_most_a_few_thousand_characters(monkeypatch, capsys):
    def flood(args):
        raise errors.ExportError("cannot copy:\n" + "a/file: No space left\n" * 200_000)

    monkeypatch.setattr("harness.verbs.targets.run", flood)
    assert cli.main(["targets"]) == errors.ExportError.exit_code
    err = capsys.readouterr().err
    assert err.startswith("error: cannot copy:\na/file: No space left\n")
    assert len(err) < cli.ERROR_CHARS + 100
    assert err.rstrip().endswith("more characters not shown)")


@pytest.mark.parametrize(
    ("signum", "line"),
    [
        (signal.SIGTERM, b"error: terminated (SIGTERM)\n"),
        (signal.SIGHUP, b"error: hung up (the terminal closed)\n"),
        (signal.SIGINT, b"error: interrupted (Ctrl-C)\n"),
    ],
)
@pytest.mark.hostile
def test_a_stop_signal_while_the_harness_loads_is_its_status(signum, line):
    # The signal lands as harness.cli is imported, before main runs.
    result = run_as_module(
        "import builtins, os\n"
        "real_import = builtins.__import__\n"
        "def importing(name, *args, **kwargs):\n"
        "    if name == 'harness.cli':\n"
        f"        os.kill(os.getpid(), {int(signum)})\n"
        "    return real_import(name, *args, **kwargs)\n"
        "builtins.__import__ = importing",
        signum,
    )
    assert result.returncode == 128 + signum, result.stderr
    assert result.stderr == line


class _FullStream(io.TextIOBase):
    """A stderr on a full disk: every write fails as /dev/full's does."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def run_with_full_stderr(*args, **options) -> subprocess.CompletedProcess:
    with open("/dev/full", "w") as full:
        return subprocess.run(
            [sys.executable, "-m", "harness", *args],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=full,
            timeout=60,
            **options,
        )


@pytest.mark.hostile
@pytest.mark.parametrize(
    "args, status",
    [
        (["targets", "--tests", "main", "--tier", "nope"], errors.TargetError),
        (["check-stream", "BAD"], errors.UnreadableInput),
        (["targets"], None),
    ],
    ids=["unknown-tier", "unreadable-capture", "success"],
)
def test_a_full_stderr_leaves_the_status_of_the_outcome(tmp_path, args, status):
    (tmp_path / "bad.bin").write_bytes(b"\xc1")
    args = [str(tmp_path / "bad.bin") if arg == "BAD" else arg for arg in args]
    result = run_with_full_stderr(*args)
    assert result.returncode == (0 if status is None else status.exit_code)


@pytest.mark.hostile
def test_a_full_stderr_never_stops_a_live_check():
    from support.publisher import free_port

    endpoint = f"tcp://127.0.0.1:{free_port()}"
    result = run_with_full_stderr("check-stream", "--zmq", endpoint, "--timeout", "1")
    assert result.returncode == errors.IncompleteStream.exit_code
    assert result.stdout.decode().startswith(f"{endpoint}: 0 batches, 0 events")


@pytest.mark.hostile
def test_a_full_stderr_leaves_an_internal_error_its_status(monkeypatch):
    def broken(argv):
        raise RuntimeError("a bug")

    monkeypatch.setattr(sys, "stderr", _FullStream())
    monkeypatch.setattr(cli, "_run_verb", broken)
    assert cli.main(["targets"]) == errors.INTERNAL_ERROR
    assert sys.stderr.failed


@pytest.mark.hostile
def test_a_full_stderr_and_a_full_stdout_are_status_11():
    with open("/dev/full", "w") as full:
        result = run_harness("targets", stdout=full, stderr=full)
    assert result.returncode == errors.OutputError.exit_code
