import importlib.util

import pytest
from support.export import (
    PATCHES,
    PLACEHOLDER,
    TEST_POOL,
    export,
    mail,
    make_target,
    write_verdict,
)
from support.trees import diff, write_tree

from harness.errors import MissingDependency
from harness.submission import evidence
from harness.submission.evidence import patch_tests
from harness.submission.gitrepo import git

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
    ("after", "added", "changed", "removed"),
    [
        # moved and reformatted, nothing else: no test to run
        (BEFORE.replace("def test_kept():", "\ndef test_kept( ):"), [], [], []),
        (BEFORE + "\n\nasync def test_new():\n    pass\n", ["test_new"], [], []),
        (BEFORE.replace("[1]", "[1, 2]"), [], ["test_params"], []),
        (
            BEFORE.replace("assert True", "assert 1"),
            [],
            ["TestPool::test_method"],
            [],
        ),
        # a helper changes, its tests do not: they are not the patch's tests
        (BEFORE.replace("return 1", "return 2"), [], [], []),
        (
            BEFORE.replace("def test_kept", "def test_renamed"),
            ["test_renamed"],
            [],
            ["test_kept"],
        ),
    ],
    ids=["moved", "added", "decorator", "method", "helper", "renamed"],
)
def test_patch_tests_are_the_test_functions_it_adds_changes_or_removes(
    tmp_path, after, added, changed, removed
):
    repo, commit = commit_pair(tmp_path, BEFORE, after)
    tests = patch_tests(repo, commit)
    assert tests.added == tuple(f"tests/test_x.py::{name}" for name in added)
    assert tests.changed == tuple(f"tests/test_x.py::{name}" for name in changed)
    assert tests.removed == tuple(f"tests/test_x.py::{name}" for name in removed)


def evidence_block(body: str, number: int) -> str:
    start = body.index(f"<summary>{number}/")
    return body[start : body.index("</details>", start)]


def test_each_patch_fails_without_its_fix_and_passes_with_it(
    tmp_path, monkeypatch, cache, capsys
):
    make_target(tmp_path, monkeypatch)
    write_verdict(tier="strict")
    assert export(tmp_path / "out", "--tier", "strict", evidence=True) == 0
    body = (tmp_path / "out" / "pr-body.md").read_text()
    first = evidence_block(body, 1)
    assert "Report the parent: 2 failing without the fix, all passing with it" in first
    assert first.index("$ git checkout --quiet --detach kv-events~3\n") < first.index(
        "$ git diff kv-events~3 kv-events~2 -- tests | git apply\n"
    )
    before, after = first.split("$ git checkout --quiet --force --detach kv-events~2\n")
    assert "FAILED tests/test_pool.py::test_capacity - assert 4 == 5" in before
    assert "FAILED tests/test_pool.py::test_capacity_is_reported" in before
    assert "2 failed in " in before
    # a run that passed says so once; its PASSED lines would repeat the command
    assert "PASSED" not in after
    assert "2 passed in " in after
    # a test module that cannot be imported without the fix fails too
    assert "ERROR tests/test_ancestry.py" in evidence_block(body, 2)
    assert "1 failing without the fix, all passing with it" in evidence_block(body, 3)
    assert "- [x] **Testing and Validation:**" in body
    assert "- [x] AI assistance was used" in body
    assert "- [ ] **Design Fit:**" in body
    assert "- [ ] I used vLLM's `/pr-checklist` skill." in body
    err = capsys.readouterr().err
    assert "warning: fail-before-fix" not in err
    steps = [line for line in err.splitlines() if "exporting patch 1 of 3" in line]
    assert steps[0] == (
        "harness: exporting patch 1 of 3: its 2 test(s) without its fix: running "
        "pytest ..."
    )
    assert steps[1].startswith(
        "harness: exporting patch 1 of 3: its 2 test(s) without its fix: 2 failed in "
    )
    assert steps[2].endswith(": its 2 test(s) with its fix: running pytest ...")
    assert " with its fix: 2 passed in " in steps[3]


def test_a_test_that_passes_without_the_fix_is_reported_and_fails_the_export(
    tmp_path, monkeypatch, cache, capsys
):
    passing = TEST_POOL + "\n\ndef test_always():\n    assert True\n"
    patches = {
        **PATCHES,
        "0002-add-module.patch": mail(
            PLACEHOLDER,
            "[Core] Add a test that proves nothing",
            "It passes before the fix.",
            diff("tests/test_pool.py", TEST_POOL, passing),
        ),
    }
    patches["0001-report-the-parent.patch"] = patches.pop("0002-add-module.patch")
    make_target(tmp_path, monkeypatch, patches, series="0001-report-the-parent.patch\n")
    write_verdict()
    assert export(tmp_path / "out", evidence=True) == 1
    err = capsys.readouterr().err
    assert (
        "warning: fail-before-fix: patch 1/1 its tests do not fail without the fix"
        in err
    )
    body = (tmp_path / "out" / "pr-body.md").read_text()
    assert "proves nothing: its tests do not fail without the fix" in body
    assert "- [ ] **Testing and Validation:**" in body


def test_skipping_the_runs_is_said_in_the_body(tmp_path, monkeypatch, cache):
    make_target(tmp_path, monkeypatch)
    write_verdict()
    assert export(tmp_path / "out") == 0
    body = (tmp_path / "out" / "pr-body.md").read_text()
    assert "**Each commit's tests, without and with its fix:** not run." in body
    assert "$ git checkout" not in body
    assert "- [ ] **Testing and Validation:**" in body


def test_a_python_without_pytest_is_refused_before_any_work(
    tmp_path, monkeypatch, cache, capsys
):
    make_target(tmp_path, monkeypatch)
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *rest: None if name == "pytest" else find_spec(name, *rest),
    )
    code = export(tmp_path / "out", evidence=True)
    assert code == MissingDependency.exit_code
    err = capsys.readouterr().err
    last = err.splitlines()[-1]
    assert last.startswith("error: export runs each patch's tests")
    assert "has no pytest" in last and "`tox -e vllm-t --notest`" in last
    assert "harness: copying" not in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


CONFTEST = (
    "import os\n"
    "import tblib_is_not_installed\n"
    "from vllm import pool\n"
    "from tests import helpers\n"
)
REQUIREMENTS = (
    "# vLLM's own\n"
    "msgspec\n"
    "no-such-distribution-here >= 1.0  # a comment\n"
    "only-on-another-os; sys_platform == 'no-such-platform'\n"
    "-r other.txt\n"
)


def test_what_the_trees_tests_need_is_checked_before_any_work(
    tmp_path, monkeypatch, cache, capsys
):
    make_target(tmp_path, monkeypatch)
    write_tree(
        tmp_path / "pristine",
        {
            "tests/conftest.py": CONFTEST,
            "tests/helpers.py": "",
            "requirements/common.txt": REQUIREMENTS,
        },
    )
    code = export(tmp_path / "out", evidence=True)
    assert code == MissingDependency.exit_code
    err = capsys.readouterr().err
    last = err.splitlines()[-1]
    assert "lacks tblib_is_not_installed, no-such-distribution-here;" in last
    assert "harness: copying" not in err
    assert not (tmp_path / "out").exists()


def test_an_import_error_is_never_written_as_evidence(
    tmp_path, monkeypatch, cache, capsys
):
    needs = "import tblib_is_not_installed\n\n\ndef test_x():\n    assert False\n"
    patches = {
        "0001-report-the-parent.patch": mail(
            PLACEHOLDER,
            "[Bugfix] A test that needs what is not installed",
            "Its module cannot be imported here.",
            diff("tests/test_needs.py", None, needs),
        )
    }
    make_target(tmp_path, monkeypatch, patches, series="0001-report-the-parent.patch\n")
    write_verdict()
    code = export(tmp_path / "out", evidence=True)
    assert code == MissingDependency.exit_code
    err = capsys.readouterr().err
    assert "pytest could not import tblib_is_not_installed" in err.splitlines()[-1]
    assert not (tmp_path / "out").exists()


LONG_REASON = (
    "the reset was not published: a subscriber waited five seconds for the "
    "AllBlocksCleared that a router needs before it routes the next request"
)
LOGGING_TEST = (
    "import logging\n\nfrom vllm.pool import capacity\n\n\n"
    "def test_capacity_is_reported():\n"
    "    for _ in range(3):\n"
    '        logging.getLogger("vllm.hub").error("ERROR vllm offline: no config")\n'
    f"    assert capacity() > 4, {LONG_REASON!r}\n"
)


def test_only_pytests_own_outcomes_count_and_a_reason_is_quoted_whole(
    tmp_path, monkeypatch, cache
):
    """A test's captured log lines that start with ERROR (vLLM's logger, as
    HF_HUB_OFFLINE makes it say) are no failures: the count is pytest's own,
    and the failure's reason is quoted whole, not cut at the terminal."""
    patches = {
        "0001-report-the-parent.patch": mail(
            PLACEHOLDER,
            "[Bugfix] Report the capacity",
            "Grow the pool.",
            diff(
                "vllm/pool.py",
                "def capacity():\n    return 4\n",
                "def capacity():\n    return 5\n",
            )
            + diff("tests/test_logs.py", None, LOGGING_TEST),
        )
    }
    make_target(tmp_path, monkeypatch, patches, series="0001-report-the-parent.patch\n")
    write_verdict()
    assert export(tmp_path / "out", evidence=True) == 0
    block = evidence_block((tmp_path / "out" / "pr-body.md").read_text(), 1)
    assert "Report the capacity: 1 failing without the fix, all passing" in block
    assert (
        "FAILED tests/test_logs.py::test_capacity_is_reported - AssertionError: "
        f"{LONG_REASON}\n"
    ) in block
    assert "1 failed in " in block
    assert "ERROR vllm" not in block and "vllm.hub" not in block


def test_outcome_lines_are_read_in_the_short_summary_only():
    output = "\n".join(
        [
            "tests/test_x.py F",
            "=" * 10 + " FAILURES " + "=" * 10,
            "ERROR    vllm.config:config.py:1 not a failure",
            "ERROR vllm something else",
            "=" * 10 + " short test summary info " + "=" * 10,
            "PASSED tests/test_x.py::test_a",
            "FAILED tests/test_x.py::test_b - assert 1 == 2",
            "ERROR tests/test_y.py - ModuleNotFoundError: No module named 'z'",
            "=" * 10 + " 1 failed, 1 passed, 1 error in 0.10s " + "=" * 10,
            "ERROR late line",
        ]
    )
    lines = evidence.outcome_lines(output)
    assert lines == [
        "PASSED tests/test_x.py::test_a",
        "FAILED tests/test_x.py::test_b - assert 1 == 2",
        "ERROR tests/test_y.py - ModuleNotFoundError: No module named 'z'",
    ]
    run = evidence.TestRun((), (*lines, "1 failed, 1 passed, 1 error in 0.10s"), 1)
    assert run.counts == {"failed": 1, "passed": 1, "error": 1}
    assert run.failing == 2 and run.failed
    # pytest's closing line lost (its usage error on stderr beside it, when a
    # test module cannot be imported): its own FAILED and ERROR lines count
    unclosed = evidence.TestRun((), tuple(lines), 4)
    assert unclosed.summary == "" and unclosed.failing == 2 and unclosed.failed
    assert not evidence.TestRun((), tuple(lines[:1]), 1).failed
