import json
import shutil

import pytest
from support.trees import (
    POOL,
    TEST_POOL,
    UPSTREAM_OUTCOMES,
    UPSTREAM_TREE,
    diff,
    make_sdist,
    sha256_of,
    target_table,
    unwritable_directory,
    use_checkout,
    write_pins,
    write_tree,
)

from harness import cli
from harness.suites import conformance
from harness.trees import preflight

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
    write_tree(tmp_path / "pristine", UPSTREAM_TREE)
    use_checkout(
        monkeypatch, write_pins(tmp_path, target_table('{ path = "pristine" }'))
    )
    suite = write_tree(tmp_path / "conformance", {"test_conformance.py": CONFORMANCE})
    monkeypatch.setattr(conformance, "conformance_suite", lambda: suite)
    # The tiny tree's tests need none of vLLM's requirements.
    monkeypatch.setattr(preflight, "VLLM_REQUIREMENTS", ("json",))
    return tmp_path


def use_patches(project, patches: dict[str, str]):
    write_tree(project / "patches", patches)
    (project / "patches" / "series").write_text(
        "".join(f"{name}\n" for name in patches)
    )


def run_verb(*extra: str) -> int:
    return cli.main(["test", "--target", "t", "-n", "0", *extra])


def test_clean_series_passes_and_writes_the_report(project, capsys):
    use_patches(project, {"0001-add-test.patch": ADD_TEST})
    report = project / "verdict.json"
    assert run_verb("--report", str(report)) == 0
    out, err = capsys.readouterr()
    assert "tests/test_a.py::test_new_event  passed" in out
    assert "tests/test_a.py::test_needs_gpu  failed -> failed" in out
    assert "  K1 unreported ancestry: 3 -> 0" in out
    assert out.rstrip().endswith("verdict: PASS")  # the verdict comes last
    assert err.rstrip().endswith(f"verdict written to {report}")
    data = json.loads(report.read_text())
    assert data["passed"] is True
    assert data["pristine"]["outcomes"] == UPSTREAM_OUTCOMES
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
    assert out.splitlines()[2].split()[4] == "1"  # the regressions column
    assert "verdict: FAIL" in out


def test_missing_conformance_suite_fails_the_verdict(project, monkeypatch, capsys):
    use_patches(project, {"0001-add-test.patch": ADD_TEST})
    monkeypatch.setattr(
        conformance, "conformance_suite", lambda: project / "no-such-suite"
    )
    assert run_verb() == 1
    captured = capsys.readouterr()
    assert "conformance: not present" in captured.err
    assert "not present" in captured.out.splitlines()[2]


def test_pristine_outcomes_are_cached_per_source_and_fresh_reruns_them(
    project, monkeypatch, capsys
):
    archive = make_sdist(project / "index", "vllm", "9.9.9", UPSTREAM_TREE)
    source = f'{{ sdist = "vllm==9.9.9", sha256 = "{sha256_of(archive)}" }}'
    write_pins(project, target_table(source))
    monkeypatch.setattr(
        "harness.trees.sources.pip_download",
        lambda source, dest: shutil.copy(archive, dest / archive.name),
    )
    use_patches(project, {"0001-add-test.patch": ADD_TEST})
    monkeypatch.setattr(
        conformance, "conformance_suite", lambda: project / "no-such-suite"
    )
    runs_on_pristine = []
    for extra in ((), (), ("--fresh",)):
        run_verb(*extra)
        err = capsys.readouterr().err
        runs_on_pristine.append("upstream tests, pristine tree" in err)
        assert ("pristine outcomes from the cache" in err) != runs_on_pristine[-1]
    assert runs_on_pristine == [True, False, True]


@pytest.mark.hostile
def test_a_report_path_that_is_a_directory_is_refused_before_any_work(project, capsys):
    use_patches(project, {"0001-add-test.patch": ADD_TEST})
    report = project / "reports"
    report.mkdir()
    assert run_verb("--report", str(report)) == 11
    captured = capsys.readouterr()
    assert (
        captured.err == f"error: --report {report} is a directory; give a file name\n"
    )
    assert captured.out == ""


@pytest.mark.hostile
def test_an_unwritable_report_keeps_the_printed_verdict(project, capsys):
    use_patches(project, {"0001-add-test.patch": ADD_TEST})
    report = unwritable_directory(project) / "verdict.json"
    assert run_verb("--report", str(report)) == 11
    captured = capsys.readouterr()
    assert captured.out.rstrip().endswith("verdict: PASS")
    assert captured.err.splitlines()[-1].startswith(
        f"error: cannot write the verdict to {report}: "
    )
    assert captured.err.endswith("; the verdict printed above stands\n")


def test_the_verdict_records_the_tree_it_judged(project, capsys):
    from harness.series.judged import code_digest
    from harness.series.model import load_series
    from harness.targets import get_target

    use_patches(project, {"0001-add-test.patch": ADD_TEST})
    report = project / "verdict.json"
    assert run_verb("--report", str(report)) == 0
    provenance = json.loads(report.read_text())["provenance"]
    assert (
        provenance["series_sha256"] == load_series(get_target("t"), "default").digest()
    )
    assert provenance["harness_sha256"] == code_digest()


@pytest.mark.hostile
def test_two_checkouts_sharing_a_cache_keep_their_own_reports_and_logs(
    project, monkeypatch, capsys
):
    """The issue's case: two clones' runs overwrote each other's
    reports/main-default-ci.json and logs, seconds after one printed where
    its verdict was."""
    from harness import cache

    use_patches(project, {"0001-add-test.patch": ADD_TEST})
    other = project / "other"
    shutil.copytree(project, other, ignore=shutil.ignore_patterns("other", "cache"))
    written = {}
    for checkout in (project, other):
        use_checkout(monkeypatch, checkout / "harness" / "targets.toml")
        assert run_verb() == 0
        report = cache.report("t", "default", "ci")
        assert capsys.readouterr().err.rstrip().endswith(f"verdict written to {report}")
        logs = sorted(report.parent.parent.glob("logs/*.log"))
        assert [log.name for log in logs] == [
            "t-ci-pristine.log",
            "t-default-ci-patched.log",
            "t-default-conformance.log",
        ]
        written[checkout] = report, report.read_bytes(), logs
        note = report.parent.parent / "checkout"
        assert note.read_text() == f"{checkout.resolve()}\n"
    (first, first_bytes, first_logs), (second, _, second_logs) = written.values()
    assert first != second and first.parent.parent.parent == second.parent.parent.parent
    assert first.read_bytes() == first_bytes  # the second run wrote its own
    assert not set(first_logs) & set(second_logs)
