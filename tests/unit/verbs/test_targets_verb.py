"""`targets`: the pinned targets with their release, and one target's
upstream tests for a fork's pytest."""

import resource
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO_ROOT
from support.files import fifo_that_ends, sparse_file

from harness import cli
from harness.targets import get_target


def test_targets_lists_each_release(capsys):
    assert cli.main(["targets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["main", "sdist", "0.34.0"]
    assert any(line.split()[:3] == ["0.32", "sdist", "0.32.0"] for line in lines)


def test_tests_prints_a_targets_selection_one_per_line(capsys):
    assert cli.main(["targets", "--tests", "0.32", "--selection", "full"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == list(get_target("0.32").selection("full"))
    assert "tests/distributed/test_kv_cache_events.py" in printed


def test_tests_of_an_unknown_target_is_one_line(capsys):
    assert cli.main(["targets", "--tests", "0.1"]) == 5
    assert capsys.readouterr().err.startswith("error: ")


def test_tests_in_a_tree_leave_out_a_test_it_does_not_define(tmp_path, capsys):
    scheduler = tmp_path / "tests/v1/core/test_scheduler.py"
    scheduler.parent.mkdir(parents=True)
    scheduler.write_text("def test_schedule():\n    pass\n")
    assert cli.main(["targets", "--tests", "main", "--in", str(tmp_path)]) == 0
    printed = capsys.readouterr().out.splitlines()
    selection = get_target("main").selection("ci")
    single = [test for test in selection if "::" in test]
    assert single and printed == [test for test in selection if "::" not in test]


def test_tests_in_a_missing_directory_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["targets", "--tests", "main", "--in", str(tmp_path / "absent")])
    assert stop.value.code == 2
    assert "--in" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra", [["--in", "."], ["--selection", "full"], ["--tier", "strict"]]
)
def test_an_option_of_tests_without_tests_is_a_usage_error(capsys, extra):
    with pytest.raises(SystemExit) as stop:
        cli.main(["targets", *extra])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--in, --selection and --tier go with --tests TARGET" in err


SCHEDULER_TEST = (
    "tests/v1/core/test_scheduler.py::"
    "test_reset_prefix_cache_publishes_kv_cache_events_at_once"
)


ADDED_BY_0003 = (
    "tests/v1/core/test_prefix_caching.py::test_blocks_after_masked_blocks_span_them"
)


def test_tests_of_a_tier_leave_out_what_only_another_tier_adds(capsys):
    """Both tiers' 0001 adds the scheduler's test; the strict tier's 0003
    adds a test the default tier's tree does not have, so its selection
    leaves it out."""
    selection = list(get_target("main").selection("ci"))
    assert cli.main(["targets", "--tests", "main", "--tier", "strict"]) == 0
    assert capsys.readouterr().out.splitlines() == selection
    assert cli.main(["targets", "--tests", "main", "--tier", "default"]) == 0
    default = capsys.readouterr().out.splitlines()
    assert SCHEDULER_TEST in selection and SCHEDULER_TEST in default
    assert ADDED_BY_0003 in selection and ADDED_BY_0003 not in default
    assert [test for test in selection if "::" not in test] == [
        test for test in default if "::" not in test
    ]


def test_tests_of_an_unknown_tier_is_one_line(capsys):
    assert cli.main(["targets", "--tests", "main", "--tier", "strikt"]) == 5
    err = capsys.readouterr().err
    assert err == (
        "error: target main: no tier 'strikt' in its series table (it has: "
        "default, strict)\n"
    )


@pytest.mark.hostile
def test_targets_from_a_removed_working_directory_lists_them(
    tmp_path, monkeypatch, capsys
):
    (tmp_path / "gone").mkdir()
    monkeypatch.chdir(tmp_path / "gone")
    (tmp_path / "gone").rmdir()
    assert cli.main(["targets"]) == 0
    assert "main" in capsys.readouterr().out


def a_fork(tmp_path, make) -> Path:
    """A fork whose tests/v1/core/test_scheduler.py is what ``make`` leaves."""
    scheduler = tmp_path / "tests/v1/core/test_scheduler.py"
    scheduler.parent.mkdir(parents=True)
    make(scheduler)
    return tmp_path


def in_fork(tree: Path, **options) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", "targets", "--tests", "main", "--in", tree],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        **options,
    )


def at_most_a_gibibyte():
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


# A hostile fork's scheduler test file, and what the warning says of it.
UNREADABLE_TEST_FILES = {
    "a-fifo": (fifo_that_ends, "a FIFO, not a regular file"),
    "a-link-to-dev-zero": (
        lambda path: path.symlink_to("/dev/zero"),
        "a character device, not a regular file",
    ),
    "larger-than-any-test-file": (
        sparse_file,
        "larger than 16 MiB, which no test file is",
    ),
}


@pytest.mark.hostile
@pytest.mark.parametrize("name", sorted(UNREADABLE_TEST_FILES))
def test_a_test_file_of_a_fork_that_cannot_be_read_leaves_its_tests_out(tmp_path, name):
    make, reason = UNREADABLE_TEST_FILES[name]
    fork = a_fork(tmp_path, make)
    result = in_fork(fork, preexec_fn=at_most_a_gibibyte)
    assert result.returncode == 0, result.stderr
    scheduler = fork / "tests/v1/core/test_scheduler.py"
    assert result.stderr == (
        f"warning: {scheduler}: cannot be read ({reason}); its single tests are "
        f"left out\n"
    )
    assert SCHEDULER_TEST not in result.stdout.splitlines()


@pytest.mark.hostile
def test_a_test_file_too_deep_to_parse_is_left_to_pytest(tmp_path, capsys):
    deep = "def test_x():\n    x = " + "+".join(["1"] * 100_000) + "\n"
    fork = a_fork(tmp_path, lambda path: path.write_text(deep))
    assert cli.main(["targets", "--tests", "main", "--in", str(fork)]) == 0
    captured = capsys.readouterr()
    assert SCHEDULER_TEST in captured.out.splitlines()
    assert captured.err == ""
