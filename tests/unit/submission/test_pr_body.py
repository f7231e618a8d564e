import json
import re
from dataclasses import replace

import pytest
from support.export import (
    SUBMITTER,
    export,
    kv_events_source,
    make_target,
    write_verdict,
)
from support.trees import make_target as tiny_target
from support.trees import write_tree

from harness.submission import (
    discussion,
    pr_body,
    pr_prose,
    pr_template,
    upstream_designs,
)
from harness.submission.evidence import PatchEvidence, PatchTests, TestRun
from harness.submission.submission import Submission
from harness.submission.submitter import parse_identity
from harness.submission.wire_header import KV_EVENTS, WireFacts, measure
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
    assert "VLLM_TARGET_DEVICE=cpu PYTHONPATH=. python -m pytest " in plan
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
    write_verdict()
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


def test_a_test_outside_the_verdicts_selection_is_no_gap(tmp_path):
    """A file the verdict's selection does not run (the scheduler's tests,
    say) says nothing about which revision the verdict was made from."""
    sub = submission(tmp_path, VERDICT)
    outside = PatchTests(added=("tests/test_elsewhere.py::test_new",))
    assert replace(sub, tests=(outside,)).verdict_gaps == []


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
    )
    assert sub.upstream_tests_changed == [[], ["tests/test_a.py::TestUp::test_up"]]
    body, _ = pr_body.render(pr_template.BUILTIN_TEMPLATE, sub)
    assert "2. [Bugfix] Two (changes upstream's `TestUp::test_up`)\n" in body
    assert "`test_ours`" not in body


@pytest.mark.parametrize(
    "report",
    [[1, 2], {"classes": [1]}, {"classes": {"K1": 3, "K2": {"pristine": 4}}}],
    ids=["list", "classes-list", "counts-missing"],
)
@pytest.mark.hostile
def test_a_conformance_report_of_another_shape_leaves_its_rows_out(tmp_path, report):
    conformance = {"status": "passed", "passed": 2, "failed": 0, "report": report}
    sub = submission(tmp_path, dict(VERDICT, conformance=conformance))
    body, _ = pr_body.render(pr_template.BUILTIN_TEMPLATE, sub)
    assert "**The stream** (passed: 2 checks passed, 0 failed)" in body
    assert "| finding |" not in body
    assert pr_prose.plain("K1") not in body


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
        "Still in the stream: 3 × a partial entry inside the first cache block: "
        "not addressed by these commits; 4 × a store after a block no event "
        "announced (a skipped sliding-window or Mamba block): not addressed by "
        "these commits; 2 × a hash stored again while "
        "live (several physical copies): vLLM holds one hash in several blocks, "
        "and consumers must count copies."
    )
    # A class another tier fixes is not promised to a PR that does not hold it.
    assert "optional commit" not in body and "optional follow-up" not in body
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
    rewrites = "except the stores after a skipped or evicted block, which it rewrites"
    assert (rewrites in claim[0]) == fixes_k4


@pytest.mark.parametrize("fixes_k4", [False, True])
@pytest.mark.parametrize("stream", ["ancestry", "holdings"])
def test_design_says_what_the_tier_reports(tmp_path, fixes_k4, stream):
    """The design paragraph follows the tier's stream (harness/targets.toml
    `streams`) and the classes it fixes."""
    sub = submission(tmp_path, VERDICT)
    fixes = {"K1", "K4"} if fixes_k4 else {"K1"}
    target = replace(
        sub.target, fixes={"default": frozenset(fixes)}, streams={"default": stream}
    )
    sub = replace(sub, target=target)
    design = pr_body.details(sub).split("**Design.** ", 1)[1].split("\n", 1)[0]
    assert ("every store dense, under the block before it" in design) == fixes_k4
    holdings = stream == "holdings"
    assert ("stored from the start of its cache block" in design) == holdings
    assert ("one `BlockRemoved` per boundary" in design) != holdings
    assert "published when the reset happens" in design


def measured(tmp_path, fields: int) -> WireFacts:
    tree = write_tree(
        tmp_path / f"tree-{fields}", {str(KV_EVENTS): kv_events_source(fields)}
    )
    return measure(tree, f"vLLM with {fields} fields")


@pytest.mark.parametrize("fields", [14, 15])
def test_the_body_claims_a_header_change_only_where_the_measurement_shows_one(
    tmp_path, fields
):
    wire = measured(tmp_path, fields)
    sub = replace(submission(tmp_path, VERDICT), wire=wire)
    body, _ = pr_body.render(pr_template.BUILTIN_TEMPLATE, sub)
    paragraph = body.split("**Wire format**", 1)[1].split("\n", 1)[0]
    claims_change = "would change the bytes of every store" in paragraph
    assert claims_change is not wire.unchanged
    assert f"declares {fields} fields" in paragraph
    assert f"starts with `{WireFacts.header(wire.encoded)}`" in paragraph
    if wire.unchanged:
        assert f"encodes to the same {wire.size} bytes" in paragraph
        assert "would not change a byte" in paragraph
    else:
        assert f"`{WireFacts.header(wire.extended)}`" in paragraph
        assert f"{wire.size} bytes" in paragraph
        assert f"{wire.extended_size} bytes" in paragraph
    # The unmeasured claim of earlier bodies is gone on every target.
    assert "map header of every payload" not in body
    without, _ = pr_body.render(pr_template.BUILTIN_TEMPLATE, submission(tmp_path))
    assert "**Wire format**" not in without


# Words of the harness a reviewer cannot look up (outside code, where the
# commands that reproduce the figures name the harness's own options).
HARNESS_ONLY = re.compile(
    r"\b(tiers?|conformance|verdicts?|ancestry overlap|fail-before-fix|"
    r"stream contract|strict|classes K\d)\b",
    re.IGNORECASE,
)
CONTRACT_ID = re.compile(r"\b[CK][1-8]\b")


def prose(body: str) -> str:
    """The body without code, and without the template's checklist."""
    body = body.split("\n---\n", 1)[0]
    return re.sub(r"```.*?```|`[^`\n]*`", "", body, flags=re.DOTALL)


def before_after(**rows: tuple[int, int]) -> dict[str, dict[str, int]]:
    return {key: {"pristine": a, "patched": b} for key, (a, b) in rows.items()}


FULL_REPORT = {
    "workloads": 45,
    "classes": before_after(
        K1=(1142, 0), K2=(474, 470), K3=(69, 69), K4=(1186, 1186), K5=(391, 391)
    ),
    "ancestry_overlap": 5,
    "rules": before_after(
        C1=(1908, 762), C2=(0, 0), C3=(963, 963), C4=(0, 0), C5=(0, 0), C6=(0, 0)
    ),
    "fidelity": {
        "pool-2x6": {
            tree: {
                "combined": {
                    "probes": 10,
                    "exact": 10 - over - 2,
                    "over": over,
                    "under": 2,
                    "hits": 4,
                    "over_tokens": 0,
                    "under_tokens": 8,
                }
            }
            for tree, over in (("pristine", 0), ("patched", 3))
        }
    },
}


def full_submission(tmp_path, **changes) -> Submission:
    conformance = {"status": "passed", "passed": 9, "failed": 0, "report": FULL_REPORT}
    sub = submission(tmp_path, dict(VERDICT, conformance=conformance))
    measures = {
        "wire": measured(tmp_path, 15),
        "changed_lines": 282,
        "changed_lines_per_commit": (282,),
        "upstream": UPSTREAM_RESULTS,
    }
    return replace(sub, **{**measures, **changes})


def test_the_body_leaves_no_harness_label_unexplained(tmp_path):
    body, _ = pr_body.render(pr_template.BUILTIN_TEMPLATE, full_submission(tmp_path))
    text = prose(body)
    assert HARNESS_ONLY.findall(text) == []
    assert CONTRACT_ID.findall(text) == []
    assert "seeded workloads (random mixes of requests" in body
    # Every count left in the stream is said in plain words, with its cause.
    assert "470 × a partial entry inside the first cache block" in body
    assert (
        "the 1725 left by cause are the 1725 left by rule (762 × a store whose "
        "parent is not live and 963 × a store whose hashes and tokens differ in "
        "length)"
    ) in body
    assert "over-predicted 0 -> 3; under-predicted 2 -> 2" in body
    assert "a router over-predicts 3 more hits than on the release" in body


def test_an_id_a_subject_carries_is_explained_in_a_legend(tmp_path):
    sub = full_submission(tmp_path, subjects=("[Bugfix] Fix K4 and C3",))
    body, _ = pr_body.render(pr_template.BUILTIN_TEMPLATE, sub)
    legend = [line for line in body.splitlines() if line.startswith("**Terms.**")]
    assert legend == [
        f"**Terms.** C3: {pr_prose.plain('C3')}; K4: {pr_prose.plain('K4')}."
    ]
    for found in CONTRACT_ID.findall(prose(body)):
        assert f"{found}: {pr_prose.plain(found)}" in legend[0]


@pytest.mark.parametrize("lines", [282, 504])
def test_the_size_is_counted_and_the_rfc_said_where_it_needs_one(tmp_path, lines):
    sub = full_submission(tmp_path, changed_lines=lines)
    body, left = pr_body.render(pr_template.BUILTIN_TEMPLATE, sub)
    assert f"**Size.** {lines} changed lines outside `tests/`" in body
    needs = lines > pr_body.RFC_LINE_LIMIT
    assert ("asks for an RFC issue first" in body) is needs
    assert any("RFC" in item for item in left) is needs


UPSTREAM_RESULTS = {
    "target": "t",
    "release": "vLLM t",
    "measured": "2026-12-01",
    "revision": "abc1234",
    "workloads": {"configs": ["pool-2x6"], "seeds": 1, "ops": 10, "probes": 4},
    "trees": {
        name: {
            "events": events,
            "bytes": events * 100,
            "pristine_events_changed": changed,
            "consumers": {
                consumer: {
                    "rules": {"C1": c1},
                    "classes": {"K1": k1 if consumer == "reading" else 7},
                    "router": {"probes": 10, "exact": 8, "over": 0, "under": 2},
                }
                for consumer in ("ignoring", "reading")
            },
            "tests": {"passed": 5, "failed": 1} if name == "upstream" else None,
        }
        for name, events, changed, c1, k1 in (
            ("pristine", 10, 0, 7, 7),
            ("default", 14, 0, 0, 0),
            ("strict", 16, 2, 0, 0),
            ("upstream", 10, 3, 1, 2),
        )
    },
}


def test_upstreams_design_is_quoted_beside_the_tier_only(tmp_path):
    body, _ = pr_body.render(pr_template.BUILTIN_TEMPLATE, full_submission(tmp_path))
    against = body.split("**Against #58121.**", 1)[1].split("\n\n**", 1)[0]
    rows = [line for line in against.splitlines() if line.startswith("| ")][2:]
    assert [row.split(" | ")[0] for row in rows] == [
        "| vLLM t",
        "| this PR",
        "| #44488 + #58121",
    ]
    assert rows[2].endswith("| 5 passed, 1 failed |")
    # totals beside the bytes per event, and the change from the release
    assert "| vLLM t | 10 | 1000 | 100 | 0 |" in rows[0]
    assert "| this PR | 14 (+40.0 %) | 1400 (+40.0 %) | 100 | 0 |" in rows[1]
    assert "| 10 (+0.0 %) | 1000 (+0.0 %) | 100 | 3 | 1 / 1 |" in rows[2]
    assert "strict" not in against
    assert (
        "still finds 2 × a partial entry's first registration whose parent "
        "boundary no event reported, which these commits fix"
    ) in against
    assert "Details compares the two, with numbers." in body


def test_upstreams_figures_are_read_only_for_their_target(tmp_path):
    results = tmp_path / upstream_designs.RESULTS
    assert upstream_designs.load("t", tmp_path) is None
    results.parent.mkdir(parents=True)
    results.write_text(json.dumps(UPSTREAM_RESULTS))
    assert upstream_designs.load("t", tmp_path) == UPSTREAM_RESULTS
    assert upstream_designs.load("main", tmp_path) is None
    results.write_text(json.dumps(dict(UPSTREAM_RESULTS, trees={})))
    assert upstream_designs.load("t", tmp_path) is None
    results.write_text("{not json")
    assert upstream_designs.load("t", tmp_path) is None


def test_the_rfc_quotes_the_measurements(tmp_path):
    sub = full_submission(tmp_path)
    rfc = discussion.rfc_issue(sub, discussion.RFC_SECTIONS)
    assert (
        "| reported boundaries (this change) | 14 (+40.0 %) | 1400 (+40.0 %) | 100 "
        "| 0 | 0 / 0 |"
    ) in rfc
    assert "| #44488 + #58121 | 10 (+0.0 %) | 1000 (+0.0 %) | 100 | 3 | 1 / 1 |" in rfc
    assert "1. [Bugfix] Fix it (282 changed lines outside `tests/`)" in rfc
    assert "This change makes every parent the stream names one it holds" in rfc
    assert "This PR" not in rfc
    assert "282 changed lines outside `tests/` (`git diff --numstat`)" in rfc
