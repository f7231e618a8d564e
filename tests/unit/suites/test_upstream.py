"""Upstream tests run in a tree, and their outcomes read back exactly."""

import pytest
from support.trees import UPSTREAM_OUTCOMES, UPSTREAM_TREE, write_tree

from harness.errors import TestRunError
from harness.suites.upstream import run_upstream, runnable_in
from harness.verdict import tally


def test_outcomes_keep_node_ids_classes_and_parameters(tmp_path):
    tree = write_tree(tmp_path / "tree", UPSTREAM_TREE)
    assert (
        run_upstream(tree, ("tests/test_a.py",), "0", "pristine") == UPSTREAM_OUTCOMES
    )


def test_collection_error_is_an_outcome_and_the_rest_still_runs(tmp_path):
    tree = write_tree(
        tmp_path / "tree", {**UPSTREAM_TREE, "tests/test_gone.py": "import gone\n"}
    )
    outcomes = run_upstream(tree, ("tests",), "0", "patched")
    assert outcomes["tests/test_gone.py"] == "error"
    assert outcomes["tests/test_a.py::test_capacity"] == "passed"


def test_a_test_the_tree_does_not_define_is_left_out_of_its_run(tmp_path):
    added = "tests/test_a.py::test_added_by_the_series"
    tree = write_tree(tmp_path / "tree", UPSTREAM_TREE)
    assert runnable_in(tree, ("tests/test_a.py::test_param[1]", added)) == [
        "tests/test_a.py::test_param[1]"
    ]
    assert runnable_in(tree, ("tests/test_a.py::TestDevice::test_cpu",)) == [
        "tests/test_a.py::TestDevice::test_cpu"
    ]
    assert runnable_in(tree, ("tests/test_absent.py::test_x", "tests")) == ["tests"]
    # pytest alone would run nothing: a node id it cannot find stops it (exit 4)
    outcomes = run_upstream(tree, ("tests/test_a.py::test_capacity", added), "0", "x")
    assert outcomes == {"tests/test_a.py::test_capacity": "passed"}


def test_a_run_that_ran_nothing_is_refused(tmp_path):
    tree = write_tree(tmp_path / "tree", UPSTREAM_TREE)
    with pytest.raises(TestRunError, match="pytest on the pristine tree exited 4"):
        run_upstream(tree, ("tests/test_absent.py",), "0", "pristine")


def test_pytest_output_goes_to_the_log_and_progress_counts_outcomes(
    tmp_path, monkeypatch, capsys
):
    from harness.suites import upstream

    monkeypatch.setattr(upstream, "PROGRESS_EVERY_S", 0.2)
    slow = "import time\n\ndef test_slow():\n    time.sleep(1.5)\n"
    tree = write_tree(tmp_path / "tree", {**UPSTREAM_TREE, "tests/test_z.py": slow})
    log = tmp_path / "logs" / "patched.log"
    outcomes = run_upstream(tree, ("tests",), "0", "patched", log)
    err = capsys.readouterr().err
    assert outcomes["tests/test_z.py::test_slow"] == "passed"
    assert f"; output in {log}\n" in err
    assert "harness: upstream tests, patched tree: " in err
    assert " so far (" in err  # a progress line while test_slow ran
    done = [
        line for line in err.splitlines() if " in " in line and "so far" not in line
    ]
    assert done[-1].startswith(
        "harness: upstream tests, patched tree: 5 passed, 1 failed, 2 skipped in "
    )
    assert tally(outcomes) == {"passed": 5, "failed": 1, "skipped": 2}  # the row
    assert "test_slow PASSED" in log.read_text()
    assert "PASSED" not in err  # pytest's own lines only with echo


def test_echo_shows_pytest_output_as_well(tmp_path, capsys):
    tree = write_tree(tmp_path / "tree", UPSTREAM_TREE)
    run_upstream(tree, ("tests/test_a.py",), "0", "pristine", tmp_path / "a.log", True)
    assert "test_capacity PASSED" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("line", "counted"),
    [
        ("[gw1] [ 50%] PASSED tests/a.py::test_x \n", "1 passed"),
        ("tests/a.py::test_x FAILED                      [ 20%]\n", "1 failed"),
        ("[gw0] [100%] ERROR tests/a.py::test_y \n", "1 failed"),
        ("FAILED tests/a.py::test_x - AssertionError\n", "no test done"),
        ("tests/a.py::test_ERROR_name PASSED [  5%]\n", "1 passed"),
        ("tests/a.py::test_s SKIPPED (not on this machine)   [ 62%]\n", "1 skipped"),
        ("tests/a.py::test_p[partial x128, events off] PASSED [  1%]\n", "1 passed"),
        ("[gw0] [ 9%] XFAIL tests/a.py::test_p[a b] \n", "1 skipped"),
        ("tests/a.py::test_q XPASS (known)   [ 70%]\n", "1 passed"),
    ],
)
def test_the_tally_reads_only_pytest_outcome_lines(line, counted):
    from harness.suites.upstream import Tally

    tally = Tally()
    tally.see(line)
    assert str(tally) == counted


def test_a_test_that_passes_then_errors_at_teardown_is_one_failed_test():
    from harness.suites.upstream import Tally

    tally = Tally()
    for line in (
        "tests/a.py::test_x PASSED                      [ 50%]\n",
        "tests/a.py::test_x ERROR                       [ 50%]\n",
        "tests/a.py::test_y[one two] PASSED                [100%]\n",
    ):
        tally.see(line)
    assert str(tally) == "1 passed, 1 failed"


CHANGED_AND_ADDED = """\
--- a/tests/test_a.py
+++ b/tests/test_a.py
@@ -1,2 +1,6 @@
-def test_old(x):
+def test_old(x, y):
     pass
+def test_new():
+    pass
+class TestK:
+    async def test_method(self):
+        pass
--- a/vllm/core.py
+++ b/vllm/core.py
@@ -1 +1 @@
-def test_helper():
+def test_helper_renamed():
"""


def test_the_tests_a_series_adds_are_new_defs_in_a_test_file_or_not(tmp_path):
    """A def line added and removed in one file is a changed test, not a new
    one; -p0 keeps the path's first component."""
    from harness.series.model import Series, SeriesEntry
    from harness.suites.upstream import _tests_added

    (tmp_path / "one.patch").write_text(CHANGED_AND_ADDED)
    (tmp_path / "zero.patch").write_text(
        CHANGED_AND_ADDED.replace("a/", "").replace("b/", "")
    )
    series = Series(
        tmp_path,
        tmp_path / "series",
        (SeriesEntry("one.patch", 1), SeriesEntry("zero.patch", 0)),
    )
    assert _tests_added(series) == {
        ("tests/test_a.py", "test_new"),
        ("tests/test_a.py", "test_method"),
        ("vllm/core.py", "test_helper_renamed"),
    }
