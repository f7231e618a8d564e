import json
import shutil

import pytest
from fixture_trees import (
    diff,
    make_sdist,
    sha256_of,
    target_table,
    write_pins,
    write_tree,
)

from harness import cli, targets, testrun
from harness.testrun import TestRunError, run_upstream

POOL = "def capacity():\n    return 4\n"
TEST_POOL = """\
import os

import pytest

from vllm.pool import capacity


def test_capacity():
    assert capacity() == 4


@pytest.mark.parametrize("blocks", [1, 2])
def test_param(blocks):
    assert blocks > 0


class TestDevice:
    def test_cpu(self):
        assert os.environ["VLLM_TARGET_DEVICE"] == "cpu"


def test_needs_gpu():
    raise AssertionError("no GPU here")


@pytest.mark.skip(reason="not on this machine")
def test_skipped():
    pass


@pytest.mark.xfail(strict=True)
def test_known_bug():
    raise AssertionError
"""
TREE = {"vllm/__init__.py": "", "vllm/pool.py": POOL, "tests/test_a.py": TEST_POOL}
PRISTINE_OUTCOMES = {
    "tests/test_a.py::test_capacity": "passed",
    "tests/test_a.py::test_param[1]": "passed",
    "tests/test_a.py::test_param[2]": "passed",
    "tests/test_a.py::TestDevice::test_cpu": "passed",
    "tests/test_a.py::test_needs_gpu": "failed",
    "tests/test_a.py::test_skipped": "skipped",
    "tests/test_a.py::test_known_bug": "skipped",
}
ADD_TEST = diff(
    "tests/test_a.py", TEST_POOL, TEST_POOL + "\n\ndef test_new_event():\n    pass\n"
)
BREAK_POOL = diff("vllm/pool.py", POOL, POOL.replace("4", "5"))
CONFORMANCE = """\
import json
import os
from pathlib import Path


def test_trees_are_handed_over():
    assert os.environ["HARNESS_TARGET"] == "t"
    assert os.environ["HARNESS_TIER"] == "default"
    pristine = Path(os.environ["HARNESS_PRISTINE_TREE"])
    patched = Path(os.environ["HARNESS_PATCHED_TREE"])
    assert pristine.is_absolute() and patched.is_absolute()
    assert "test_new_event" in (patched / "tests" / "test_a.py").read_text()
    assert "test_new_event" not in (pristine / "tests" / "test_a.py").read_text()
    report = {"classes": {"K1": {"pristine": 3, "patched": 0}}, "rules": {"C1": "ok"}}
    Path(os.environ["HARNESS_CONFORMANCE_REPORT"]).write_text(json.dumps(report))
"""


@pytest.fixture
def project(tmp_path, monkeypatch, cache):
    """A pin file with target t, its pristine tree and a conformance suite."""
    write_tree(tmp_path / "pristine", TREE)
    monkeypatch.setattr(
        targets,
        "TARGETS_FILE",
        write_pins(tmp_path, target_table('{ path = "pristine" }')),
    )
    suite = write_tree(tmp_path / "conformance", {"test_conformance.py": CONFORMANCE})
    monkeypatch.setattr(testrun, "CONFORMANCE_SUITE", suite)
    return tmp_path


def use_patches(project, patches: dict[str, str]):
    write_tree(project / "patches", patches)
    (project / "patches" / "series").write_text(
        "".join(f"{name}\n" for name in patches)
    )


def run_verb(*extra: str) -> int:
    return cli.main(["test", "--target", "t", "-n", "0", *extra])


def test_outcomes_keep_node_ids_classes_and_parameters(tmp_path):
    tree = write_tree(tmp_path / "tree", TREE)
    assert (
        run_upstream(tree, ("tests/test_a.py",), "0", "pristine") == PRISTINE_OUTCOMES
    )


def test_collection_error_is_an_outcome_and_the_rest_still_runs(tmp_path):
    tree = write_tree(
        tmp_path / "tree", {**TREE, "tests/test_gone.py": "import gone\n"}
    )
    outcomes = run_upstream(tree, ("tests",), "0", "patched")
    assert outcomes["tests/test_gone.py"] == "error"
    assert outcomes["tests/test_a.py::test_capacity"] == "passed"


def test_a_run_that_ran_nothing_is_refused(tmp_path):
    tree = write_tree(tmp_path / "tree", TREE)
    with pytest.raises(TestRunError, match="pytest on the pristine tree exited 4"):
        run_upstream(tree, ("tests/test_absent.py",), "0", "pristine")


def test_clean_series_passes_and_writes_the_report(project, capsys):
    use_patches(project, {"0001-add-test.patch": ADD_TEST})
    report = project / "verdict.json"
    assert run_verb("--report", str(report)) == 0
    out = capsys.readouterr().out
    assert "tests/test_a.py::test_new_event  passed" in out
    assert "tests/test_a.py::test_needs_gpu  failed -> failed" in out
    assert "  K1: 3 -> 0" in out
    assert out.rstrip().endswith(f"verdict written to {report}")
    data = json.loads(report.read_text())
    assert data["passed"] is True
    assert data["pristine"]["outcomes"] == PRISTINE_OUTCOMES
    assert data["added"] == {"tests/test_a.py::test_new_event": "passed"}
    assert data["conformance"]["status"] == "passed"
    assert data["conformance"]["report"]["rules"] == {"C1": "ok"}


def test_regression_fails_the_verdict(project, capsys):
    use_patches(
        project, {"0001-add-test.patch": ADD_TEST, "0002-break.patch": BREAK_POOL}
    )
    assert run_verb() == 1
    out = capsys.readouterr().out
    assert "tests/test_a.py::test_capacity  passed -> failed" in out
    assert out.splitlines()[1].split()[4] == "1"  # the regressions column
    assert "verdict: FAIL" in out


def test_missing_conformance_suite_fails_the_verdict(project, monkeypatch, capsys):
    use_patches(project, {"0001-add-test.patch": ADD_TEST})
    monkeypatch.setattr(testrun, "CONFORMANCE_SUITE", project / "no-such-suite")
    assert run_verb() == 1
    captured = capsys.readouterr()
    assert "conformance: not present" in captured.err
    assert "not present" in captured.out.splitlines()[1]


def test_pristine_outcomes_are_cached_per_source_and_fresh_reruns_them(
    project, monkeypatch, capsys
):
    archive = make_sdist(project / "index", "vllm", "9.9.9", TREE)
    source = f'{{ sdist = "vllm==9.9.9", sha256 = "{sha256_of(archive)}" }}'
    write_pins(project, target_table(source))
    monkeypatch.setattr(
        "harness.sources.pip_download",
        lambda source, dest: shutil.copy(archive, dest / archive.name),
    )
    use_patches(project, {"0001-add-test.patch": ADD_TEST})
    monkeypatch.setattr(testrun, "CONFORMANCE_SUITE", project / "no-such-suite")
    runs_on_pristine = []
    for extra in ((), (), ("--fresh",)):
        run_verb(*extra)
        err = capsys.readouterr().err
        runs_on_pristine.append("upstream tests, pristine tree" in err)
        assert ("pristine outcomes from the cache" in err) != runs_on_pristine[-1]
    assert runs_on_pristine == [True, False, True]
