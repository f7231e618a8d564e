import pytest
from support.trees import write_tree

from harness.series.evidence import patch_tests
from harness.series.gitrepo import git

BEFORE = """\
import pytest


def helper():
    return 1


def test_kept():
    assert helper() == 1


@pytest.mark.parametrize("n", [1])
def test_params(n):
    assert n


class TestPool:
    def test_method(self):
        assert True
"""


def commit_pair(tmp_path, before: str, after: str) -> tuple:
    """A git repository with tests/test_x.py as ``before``, then ``after``."""
    repo = write_tree(tmp_path / "repo", {"tests/test_x.py": before})
    git(repo, "init", "--quiet")
    git(repo, "add", ".")
    git(repo, "commit", "--quiet", "-m", "before")
    (repo / "tests/test_x.py").write_text(after)
    git(repo, "commit", "--quiet", "-am", "after")
    return repo, git(repo, "rev-parse", "HEAD").strip()


@pytest.mark.parametrize(
    ("after", "added", "changed"),
    [
        # moved and reformatted, nothing else: no test to run
        (BEFORE.replace("def test_kept():", "\ndef test_kept( ):"), [], []),
        (BEFORE + "\n\nasync def test_new():\n    pass\n", ["test_new"], []),
        (BEFORE.replace("[1]", "[1, 2]"), [], ["test_params"]),
        (
            BEFORE.replace("assert True", "assert 1"),
            [],
            ["TestPool::test_method"],
        ),
        # a helper changes, its tests do not: they are not the patch's tests
        (BEFORE.replace("return 1", "return 2"), [], []),
    ],
    ids=["moved", "added", "decorator", "method", "helper"],
)
def test_patch_tests_are_the_test_functions_it_adds_or_changes(
    tmp_path, after, added, changed
):
    repo, commit = commit_pair(tmp_path, BEFORE, after)
    tests = patch_tests(repo, commit)
    assert tests.added == tuple(f"tests/test_x.py::{name}" for name in added)
    assert tests.changed == tuple(f"tests/test_x.py::{name}" for name in changed)
