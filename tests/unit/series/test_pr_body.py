import json
from dataclasses import replace

import pytest
from support.export import SUBMITTER, export, make_target, write_verdict
from support.trees import make_target as tiny_target
from support.trees import write_tree

from harness.series import pr_body, pr_template
from harness.series.evidence import PatchEvidence, PatchTests, TestRun
from harness.series.submission import Submission
from harness.series.submitter import parse_identity
from harness.targets import PathSource

OLD_TEMPLATE = """\
<!-- markdownlint-disable -->
PLEASE FILL IN THE PR DESCRIPTION HERE ENSURING ALL CHECKLIST ITEMS (AT THE BOTTOM) HAVE BEEN CONSIDERED.

## Purpose

## Test Plan

## Test Result

---
<details>
<summary> Essential Elements of an Effective PR Description Checklist </summary>

- [ ] The purpose of the PR, such as "Fix some issue (link existing issues this PR will resolve)".
- [ ] The test plan, such as providing test command.
- [ ] The test results, such as pasting the results comparison before and after, or e2e results
- [ ] (Optional) The necessary documentation update, such as updating `supported_models.md` and `examples` for a new model.
</details>

**BEFORE SUBMITTING, PLEASE READ <https://docs.vllm.ai/en/latest/contributing>** (anything written below this line will be removed by GitHub Actions)
"""  # noqa: E501
MESSAGE = "Report it.\n\nFixes #58119\n\nCo-authored-by: Claude <c@x.org>\n"
PASSED = TestRun(("git checkout",), ("PASSED t::a", "1 passed in 0.1s"), 0)
FAILED = TestRun(("git checkout",), ("FAILED t::a", "1 failed in 0.1s"), 1)


def submission(tmp_path, verdict=None, evidence_ok=True) -> Submission:
    tests = PatchTests(added=("tests/test_a.py::test_a",))
    after = PASSED if evidence_ok else FAILED
    evidence = (PatchEvidence(1, "[Bugfix] Fix it", tests, FAILED, after),)
    verdict_path = None
    if verdict is not None:
        verdict_path = tmp_path / "v.json"
        verdict_path.write_text(json.dumps(verdict))
    return Submission(
        target=tiny_target(PathSource(tmp_path)),
        tier="default",
        submitter=parse_identity(SUBMITTER),
        subjects=("[Bugfix] Fix it",),
        messages=(MESSAGE,),
        optional=frozenset(),
        tests=(tests,),
        evidence=evidence,
        verdict=verdict,
        verdict_path=verdict_path,
    )


VERDICT = {
    "target": "t",
    "tier": "default",
    "selection": "ci",
    "passed": True,
    "pristine": {"tally": {"passed": 3}, "outcomes": {}},
    "patched": {
        "tally": {"passed": 4},
        "outcomes": {"tests/test_a.py::test_a": "passed"},
    },
    "regressions": {},
    "added": {"tests/test_a.py::test_a": "passed"},
    "conformance": {"status": "passed", "passed": 2, "failed": 0},
}


def test_a_release_with_the_old_template_gets_purpose_test_plan_and_result(tmp_path):
    body, left = pr_body.render(OLD_TEMPLATE, submission(tmp_path, VERDICT))
    assert body.startswith(
        "<!-- markdownlint-disable -->\n\n## Purpose\n\nFixes #58119."
    )
    assert "PLEASE FILL IN" not in body
    plan = body[body.index("## Test Plan") : body.index("## Test Result")]
    assert (
        "VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 PYTHONPATH=. python -m pytest " in plan
    )
    result = body[body.index("## Test Result") : body.index("\n---\n")]
    assert "| passed | 3 | 4 |" in result
    assert "**Duplicate-work check**" in body[: body.index("## Test Plan")]
    assert "- [x] The purpose of the PR" in body
    assert "- [x] The test plan" in body
    assert "- [x] The test results" in body
    assert "- [ ] (Optional) The necessary documentation update" in body
    assert left == ["checklist item '(Optional) The necessary documentation update'"]
    assert body.endswith(
        "(anything written below this line will be removed by GitHub Actions)\n"
    )


def test_checklist_ticks_only_what_the_export_shows(tmp_path):
    body, left = pr_body.render(
        pr_template.BUILTIN_TEMPLATE, submission(tmp_path, VERDICT)
    )
    assert "- [x] **Testing and Validation:**" in body
    assert "- [x] AI assistance was used" in body
    for item in ("Design Fit", "Code Quality and Style", "Pull Request Contents"):
        assert f"- [ ] **{item}:**" in body
        assert f"checklist item {item!r}" in left
    assert 'checklist item "I used vLLM\'s `/pr-checklist` skill"' in left
    failing = dict(VERDICT, passed=False)
    for sub in (
        submission(tmp_path, failing),
        submission(tmp_path, VERDICT, evidence_ok=False),
        submission(tmp_path, None),
    ):
        body, _ = pr_body.render(pr_template.BUILTIN_TEMPLATE, sub)
        assert "- [ ] **Testing and Validation:**" in body


def test_a_section_the_harness_does_not_know_is_kept_and_reported(tmp_path):
    template = pr_template.BUILTIN_TEMPLATE.replace(
        "## Details", "## Release Notes\n\n<!-- one line -->\n\n## Details"
    )
    body, left = pr_body.render(template, submission(tmp_path, VERDICT))
    assert (
        "## Release Notes\n\n<!-- one line -->\n\n## Details\n\n**Root cause.**" in body
    )
    assert "section 'Release Notes'" in left
    assert "<!-- Summarize" not in body


@pytest.mark.parametrize("in_tree", [True, False], ids=["tree", "built-in"])
def test_export_writes_the_trees_template_or_the_built_in_one(
    tmp_path, monkeypatch, cache, capsys, in_tree
):
    make_target(tmp_path, monkeypatch)
    if in_tree:
        write_tree(
            tmp_path / "pristine", {".github/PULL_REQUEST_TEMPLATE.md": OLD_TEMPLATE}
        )
    write_verdict(cache / "reports" / "t-default-ci.json")
    out = tmp_path / "out"
    assert export(out) == 0
    body = (out / "pr-body.md").read_text()
    assert ("## Purpose" in body) is in_tree
    assert ("## Overview" in body) is not in_tree
    source = ".github/PULL_REQUEST_TEMPLATE.md" if in_tree else "the built-in copy"
    assert f"pr-body.md follows {source}" in capsys.readouterr().err


def test_a_test_a_later_patch_removes_is_not_asked_of_the_verdict(tmp_path):
    sub = submission(tmp_path, VERDICT)
    first = PatchTests(added=("tests/test_a.py::test_old",))
    second = PatchTests(
        added=("tests/test_a.py::test_a",), removed=("tests/test_a.py::test_old",)
    )
    sub = replace(
        sub, tests=(first, second), subjects=("one", "two"), messages=("", "")
    )
    assert sub.added_tests == ["tests/test_a.py::test_a"]
    assert sub.verdict_gaps == []
    assert replace(sub, tests=(first,)).verdict_gaps == ["tests/test_a.py::test_old"]


def test_only_tests_of_the_pristine_tree_are_called_upstream_tests(tmp_path):
    first = PatchTests(added=("tests/test_a.py::test_ours",))
    second = PatchTests(
        changed=("tests/test_a.py::test_ours", "tests/test_a.py::TestUp::test_up")
    )
    sub = replace(
        submission(tmp_path, VERDICT),
        tests=(first, second),
        subjects=("[Bugfix] One", "[Bugfix] Two"),
        messages=(MESSAGE, MESSAGE),
        optional=frozenset({2}),
    )
    assert sub.upstream_tests_changed == [[], ["tests/test_a.py::TestUp::test_up"]]
    body, _ = pr_body.render(pr_template.BUILTIN_TEMPLATE, sub)
    assert "2. [Bugfix] Two (optional; changes upstream's `TestUp::test_up`)\n" in body
    assert "`test_ours`" not in body


@pytest.mark.parametrize(
    "report",
    [[1, 2], {"classes": [1]}, {"classes": {"K1": 3, "K2": {"pristine": 4}}}],
    ids=["list", "classes-list", "counts-missing"],
)
def test_a_conformance_report_of_another_shape_leaves_its_rows_out(tmp_path, report):
    conformance = {"status": "passed", "passed": 2, "failed": 0, "report": report}
    sub = submission(tmp_path, dict(VERDICT, conformance=conformance))
    body, _ = pr_body.render(pr_template.BUILTIN_TEMPLATE, sub)
    assert "**Stream contract** (passed: 2 passed, 0 failed)" in body
    assert "| class or rule |" not in body
    assert "K1 unreported ancestry" not in body


def test_limitations_name_what_the_patched_stream_still_shows_and_why(tmp_path):
    counts = {
        "K1": {"pristine": 7, "patched": 0},
        "K2": {"pristine": 3, "patched": 3},
        "K4": {"pristine": 4, "patched": 4},
        "K5": {"pristine": 2, "patched": 2},
        "K9": {"pristine": 1, "patched": 1},  # not a class of the contract
    }
    conformance = {"status": "passed", "report": {"classes": counts}}
    sub = submission(tmp_path, dict(VERDICT, conformance=conformance))
    body, _ = pr_body.render(pr_template.BUILTIN_TEMPLATE, sub)
    limitations = body.split("**Limitations.** ", 1)[1].split("\n", 1)[0]
    assert limitations == (
        "Still in the patched stream: K2 first-block partial entry (3): fixed "
        "by optional follow-up commits, not in this PR, as they change the "
        "upstream tests that pin those events; K4 nothing live to hang from "
        "(4): not addressed by these commits; K5 physical copies (2): vLLM "
        "holding one hash in several blocks, which consumers must count."
    )
    without = dict(VERDICT, conformance={"status": "passed"})
    body, _ = pr_body.render(
        pr_template.BUILTIN_TEMPLATE, submission(tmp_path, without)
    )
    assert "**Limitations.**" not in body


@pytest.mark.parametrize("fixes_k4", [False, True])
def test_wire_claim_names_the_k4_rewrites_only_where_the_tier_fixes_k4(
    tmp_path, fixes_k4
):
    sub = submission(tmp_path, VERDICT)
    fixes = {"K1", "K4"} if fixes_k4 else {"K1"}
    sub = replace(sub, target=replace(sub.target, fixes={"default": frozenset(fixes)}))
    claim = [
        line for line in pr_body.claims(sub).splitlines() if "byte for byte" in line
    ]
    assert len(claim) == 1
    assert ("except the stores of K4, which it rewrites" in claim[0]) == fixes_k4


@pytest.mark.parametrize("fixes_k4", [False, True])
def test_design_says_which_events_change_where_the_tier_fixes_k4(tmp_path, fixes_k4):
    sub = submission(tmp_path, VERDICT)
    fixes = {"K1", "K4"} if fixes_k4 else {"K1"}
    sub = replace(sub, target=replace(sub.target, fixes={"default": frozenset(fixes)}))
    design = pr_body.details(sub).split("**Design.** ", 1)[1].split("\n", 1)[0]
    assert ("every other event emitted before" in design) == fixes_k4
    assert ("runs whose tokens are exactly their hashes'" in design) == fixes_k4
