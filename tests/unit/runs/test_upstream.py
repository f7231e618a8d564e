"""Upstream tests run in a tree, and their outcomes read back exactly."""

import pytest
from support.trees import UPSTREAM_OUTCOMES, UPSTREAM_TREE, write_tree

from harness.errors import TestRunError
from harness.runs.upstream import run_upstream


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


def test_a_run_that_ran_nothing_is_refused(tmp_path):
    tree = write_tree(tmp_path / "tree", UPSTREAM_TREE)
    with pytest.raises(TestRunError, match="pytest on the pristine tree exited 4"):
        run_upstream(tree, ("tests/test_absent.py",), "0", "pristine")
