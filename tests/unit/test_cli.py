"""The one entry point: lazy verbs, help on the standard library alone, and
errors caught once with their own exit codes."""

import subprocess
import sys

import pytest
from support import REPO_ROOT
from support.cli import harness

from harness import cli, errors

# Everything the harness needs that is not in the standard library.
NOT_STDLIB = (
    "msgpack",
    "msgspec",
    "filelock",
    "zmq",
    "dynamo",
    "packaging",
    "vllm",
    "torch",
    "pytest",
)


def run_without_dependencies(
    *args: str, blocked: tuple[str, ...] = NOT_STDLIB
) -> subprocess.CompletedProcess:
    """``python -m harness ARGS`` where importing any of ``blocked`` fails."""
    blocker = (
        "import sys\n"
        f"for name in {blocked!r}:\n"
        "    sys.modules[name] = None\n"
        "from harness.cli import main\n"
        f"sys.exit(main({list(args)!r}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", blocker],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_help_lists_every_verb_and_exit_status_with_the_standard_library_only():
    result = run_without_dependencies("--help")
    assert result.returncode == 0, result.stderr
    for verb in cli.VERBS:
        assert f"\n    {verb}" in result.stdout
    assert "exit status:" in result.stdout
    for code in errors.exit_codes():
        assert f"  {code:>3}  " in result.stdout


@pytest.mark.parametrize("verb", sorted(cli.VERBS))
def test_every_verb_help_needs_the_standard_library_only(verb):
    result = run_without_dependencies(verb, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: python -m harness {verb}")


def test_only_the_verb_asked_for_is_imported():
    probe = (
        "import sys\n"
        "from harness.cli import build_parser\n"
        "build_parser('targets')\n"
        "print(sorted(m for m in sys.modules if m.startswith('harness.verbs.')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert result.stdout.strip() == "['harness.verbs.targets']", result.stderr


def test_no_verb_prints_help_and_exits_2(capsys):
    assert cli.main([]) == 2
    assert "VERB" in capsys.readouterr().out


def test_unknown_verb_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["frobnicate"])
    assert exited.value.code == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


def test_a_user_error_is_one_line_with_its_own_exit_code(capsys):
    assert cli.main(["fetch", "--target", "no-such-target"]) == (
        errors.TargetError.exit_code
    )
    err = capsys.readouterr().err
    assert err.startswith("error: unknown target 'no-such-target' (known: main")
    assert err.count("\n") == 1


def test_every_error_class_has_an_exit_code_of_its_own():
    classes = [errors.UserError, *errors.UserError.__subclasses__()]
    codes = [error.exit_code for error in classes]
    assert len(set(codes)) == len(codes)
    assert not set(codes) & set(errors.EXIT_CODES), "0, 1, 2 and 130 are taken"
    assert set(errors.exit_codes()) == set(codes) | set(errors.EXIT_CODES)


def test_a_missing_extra_is_one_line_that_names_it(tmp_path):
    out = tmp_path / "kv.bin"
    result = run_without_dependencies(
        "capture",
        "--zmq",
        "tcp://127.0.0.1:9",
        "--out",
        str(out),
        "--timeout",
        "1",
        blocked=("zmq",),
    )
    assert result.returncode == errors.MissingDependency.exit_code
    assert result.stderr == (
        "error: zmq is not installed; install the harness's 'capture' extra: "
        "pip install -e '.[capture]' in the checkout\n"
    )


def test_a_crash_is_an_internal_error_not_a_failed_check(monkeypatch, capsys):
    def crash(args):
        raise RuntimeError("a bug")

    monkeypatch.setattr("harness.verbs.targets.run", crash)
    assert cli.main(["targets"]) == errors.INTERNAL_ERROR == 70
    err = capsys.readouterr().err
    assert "RuntimeError: a bug" in err
    assert err.endswith(
        "error: internal error: this is a bug in the harness; the traceback "
        "above says where\n"
    )


def test_stop_handlers_are_the_callers_again_after_main(monkeypatch):
    import signal

    before = signal.getsignal(signal.SIGTERM)
    assert cli.main(["targets"]) == 0
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_reader_that_closes_stdout_early_is_not_a_crash():
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)  # as `| head -c 0` does, before the verb writes
    try:
        result = subprocess.run(
            [sys.executable, "-m", "harness", "ci", "matrix"],
            cwd=REPO_ROOT,
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert result.returncode == 141
    assert result.stderr == b""


def test_capture_into_a_directory_that_does_not_exist_is_one_line(tmp_path):
    out = tmp_path / "missing" / "kv.bin"
    result = harness(
        "capture", "--zmq", "tcp://127.0.0.1:9", "--out", str(out), "--timeout", "1"
    )
    assert result.returncode == errors.OutputError.exit_code
    assert result.stderr == f"error: {out}: {out.parent} does not exist\n"
