from harness.verdict import Conformance, Verdict, compare, tally

PRISTINE = {
    "t.py::test_kept": "passed",
    "t.py::test_broken[a-1]": "passed",
    "t.py::test_vanished": "passed",
    "t.py::test_skipped_now": "passed",
    "t.py::test_no_gpu": "failed",
    "t.py::test_no_gpu_setup": "error",
    "t.py::test_fixed": "failed",
    "t.py::test_always_skipped": "skipped",
}
PATCHED = {
    "t.py::test_kept": "passed",
    "t.py::test_broken[a-1]": "failed",
    "t.py::test_skipped_now": "skipped",
    "t.py::test_no_gpu": "failed",
    "t.py::test_no_gpu_setup": "failed",
    "t.py::test_fixed": "passed",
    "t.py::test_always_skipped": "skipped",
    "t.py::test_new_ok": "passed",
    "t.py::test_new_bad": "error",
}


def test_outcomes_are_classified():
    comparison = compare(PRISTINE, PATCHED)
    assert comparison.regressions == {
        "t.py::test_broken[a-1]": ("passed", "failed"),
        "t.py::test_skipped_now": ("passed", "skipped"),
        "t.py::test_vanished": ("passed", "missing"),
    }
    assert comparison.environmental == {
        "t.py::test_no_gpu": ("failed", "failed"),
        "t.py::test_no_gpu_setup": ("error", "failed"),
    }
    assert comparison.added == {
        "t.py::test_new_bad": "error",
        "t.py::test_new_ok": "passed",
    }
    assert comparison.failing_added == ["t.py::test_new_bad"]
    assert comparison.changed == {"t.py::test_fixed": ("failed", "passed")}


def test_identical_runs_have_nothing_to_report():
    comparison = compare(PRISTINE, PRISTINE)
    assert not (comparison.regressions or comparison.added or comparison.changed)
    assert set(comparison.environmental) == {
        "t.py::test_no_gpu",
        "t.py::test_no_gpu_setup",
        "t.py::test_fixed",
    }


def test_tally_counts_errors_as_failures():
    assert tally(PATCHED) == {"passed": 3, "failed": 4, "skipped": 2}


PASSING_CONFORMANCE = Conformance("passed", 3, 0)


def verdict(pristine, patched, conformance=PASSING_CONFORMANCE):
    return Verdict("main", "default", "ci", pristine, patched, conformance, 95.4)


def test_verdict_needs_no_regression_no_failing_addition_and_conformance():
    clean = dict(PRISTINE, **{"t.py::test_new_ok": "passed"})
    assert verdict(PRISTINE, clean).passed
    assert not verdict(PRISTINE, PATCHED).passed
    only_bad_addition = dict(PRISTINE, **{"t.py::test_new_bad": "failed"})
    assert not verdict(PRISTINE, only_bad_addition).passed
    assert not verdict(PRISTINE, clean, Conformance("not present")).passed
    assert not verdict(PRISTINE, clean, Conformance("failed", 2, 1)).passed


def test_rendered_verdict_shows_every_column_and_every_listed_test():
    report = {
        "classes": {"K1": {"pristine": 12, "patched": 0}},
        "rules": {"C1": {"pristine": 827, "patched": 0}, "C10": "not checked"},
    }
    text = verdict(PRISTINE, PATCHED, Conformance("failed", 5, 2, report)).render()
    header, row = text.splitlines()[:2]
    for column in (
        "target",
        "tier",
        "pristine pass/fail",
        "patched pass/fail",
        "regressions",
        "added tests",
        "environmental",
        "conformance pass/fail",
        "wall time",
    ):
        assert column in header
    assert row.split() == [
        "main",
        "default",
        "4/3",
        "3/4",
        "3",
        "2",
        "(1",
        "failing)",
        "2",
        "5/2",
        "failed",
        "1m35s",
    ]
    for test in PATCHED.keys() - {"t.py::test_kept", "t.py::test_always_skipped"}:
        assert test in text
    assert "  t.py::test_vanished  passed -> missing" in text
    assert "  K1 unreported ancestry: 12 -> 0" in text
    assert "  C1 parent closure: 827 -> 0" in text
    assert "  C10: not checked" in text
    assert text.endswith("verdict: FAIL")


def test_verdict_json_carries_outcomes_and_lists():
    data = verdict(PRISTINE, PATCHED).as_json()
    assert data["passed"] is False
    assert data["pristine"]["outcomes"] == PRISTINE
    assert data["patched"]["tally"] == {"passed": 3, "failed": 4, "skipped": 2}
    assert data["regressions"]["t.py::test_vanished"] == ("passed", "missing")
    assert data["added"]["t.py::test_new_bad"] == "error"
    assert data["conformance"]["status"] == "passed"
    assert data["wall_seconds"] == 95.4
