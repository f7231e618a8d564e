"""`targets`: the pinned targets with their release, and one target's
upstream tests for a fork's pytest."""

from harness import cli
from harness.targets import get_target


def test_targets_lists_each_release(capsys):
    assert cli.main(["targets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["main", "sdist", "0.33.0"]
    assert any(line.split()[:3] == ["0.32", "sdist", "0.32.0"] for line in lines)


def test_tests_prints_a_targets_selection_one_per_line(capsys):
    assert cli.main(["targets", "--tests", "0.32", "--selection", "full"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == list(get_target("0.32").selection("full"))
    assert "tests/distributed/test_kv_cache_events.py" in printed


def test_tests_of_an_unknown_target_is_one_line(capsys):
    assert cli.main(["targets", "--tests", "0.1"]) == 5
    assert capsys.readouterr().err.startswith("error: ")
