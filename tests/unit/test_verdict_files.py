"""Verdict files as a careless or hostile hand leaves them: `ci summary`,
`ci releases` and `export --verdict` say in one line what is wrong (status
9), keep the rows of the good ones, and a field never breaks a table."""

import json

import pytest
from support.export import export, make_target
from support.files import fifo_that_ends, sparse_file

from harness import cli
from harness.verdict import Conformance, Verdict

pytestmark = pytest.mark.hostile

CLASSES_REPORT = {"classes": {"K1": {"pristine": 5, "patched": 0}}}


def good(**changes) -> dict:
    verdict = Verdict(
        target="t",
        tier="default",
        selection="ci",
        pristine={"tests/a.py::test_a": "passed"},
        patched={"tests/a.py::test_a": "passed"},
        conformance=Conformance("passed", 3, 0, CLASSES_REPORT),
        wall_seconds=61.0,
    )
    return verdict.as_json() | changes


def deep(levels: int) -> str:
    return '{"target": ' + "[" * levels + "]" * levels + "}"


# A bad verdict's text and what its line says is wrong.
BAD = {
    "nested-100000-deep": (deep(100_000), "not JSON (nested deeper than any verdict)"),
    "infinity": (
        json.dumps(good()).replace('"wall_seconds": 61.0', '"wall_seconds": Infinity'),
        "not JSON (Infinity is not a JSON number)",
    ),
    "nan": (
        json.dumps(good()).replace('"wall_seconds": 61.0', '"wall_seconds": NaN'),
        "not JSON (NaN is not a JSON number)",
    ),
    "overflowing-number": (
        json.dumps(good()).replace('"wall_seconds": 61.0', '"wall_seconds": 1e999'),
        "not JSON (1e999 is too large for a number)",
    ),
    "target-a-number": (json.dumps(good(target=5)), "target is a int, not a str"),
    "outcome-a-number": (
        json.dumps(good(patched={"outcomes": {"t::a": 1}})),
        "patched.outcomes['t::a'] is not a string",
    ),
    "count-a-string": (
        json.dumps(good(conformance={"status": "passed", "passed": "3"})),
        "conformance.passed is '3', not a count",
    ),
    "class-counts-a-string": (
        json.dumps(
            good(conformance={"status": "passed", "report": {"classes": {"K1": "x"}}})
        ),
        "conformance.report.classes.K1 is not an object",
    ),
    "wall-seconds-true": (
        json.dumps(good(wall_seconds=True)),
        "wall_seconds is not a number",
    ),
    "provenance-a-list": (
        json.dumps(good(provenance={"date": ["x"]})),
        "provenance.date is not a string",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
@pytest.mark.parametrize("command", ["summary", "releases"])
def test_a_bad_verdict_is_one_line_and_the_good_rows_stay(
    tmp_path, capsys, name, command
):
    text, reason = BAD[name]
    bad, fine = tmp_path / "bad.json", tmp_path / "good.json"
    bad.write_text(text)
    fine.write_text(json.dumps(good()))
    assert cli.main(["ci", command, str(bad), str(fine)]) == 9
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert line.startswith(f"error: {bad}: not a verdict of `python -m harness test`")
    assert reason in line
    rows = [row for row in captured.out.splitlines() if row.startswith("| t |")]
    assert len(rows) == 1


@pytest.mark.parametrize("name", sorted(BAD))
def test_export_refuses_a_bad_verdict_before_any_work(
    tmp_path, monkeypatch, cache, capsys, name
):
    make_target(tmp_path, monkeypatch)
    text, reason = BAD[name]
    verdict = tmp_path / "v.json"
    verdict.write_text(text)
    assert export(tmp_path / "mails", "--verdict", str(verdict)) == 9
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith(f"error: {verdict}: not a verdict")
    assert reason in err[-1]
    assert not (tmp_path / "mails").exists()


@pytest.mark.parametrize("command", ["summary", "releases"])
def test_a_field_with_a_line_break_or_a_pipe_stays_in_its_cell(
    tmp_path, capsys, command
):
    report = tmp_path / "odd.json"
    report.write_text(
        json.dumps(
            good(
                target="t\n| injected | row |",
                provenance={"machine": "<img src=x>|x", "date": "d", "revision": "r"},
            )
        )
    )
    assert cli.main(["ci", command, str(report)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header, rows = lines[0], lines[2:]
    [row] = rows
    assert row.startswith("| t<br>\\| injected \\| row \\| |")
    assert row.count(" | ") == header.count(" | ")
    if command == "releases":
        assert "&lt;img src=x>\\|x" in row


@pytest.mark.parametrize("command", ["summary", "releases"])
def test_a_field_with_terminal_escapes_is_shown_without_them(tmp_path, capsys, command):
    report = tmp_path / "odd.json"
    report.write_text(json.dumps(good(tier="\x1b]0;PWNED\x07\x1b[2K\rstrict")))
    assert cli.main(["ci", command, str(report)]) == 0
    [row] = [row for row in capsys.readouterr().out.splitlines() if "PWNED" in row]
    assert row.startswith("| t | \\x1b]0;PWNED\\x07\\x1b[2K<br>strict | ci |")


def fifo(tmp_path):
    return fifo_that_ends(tmp_path / "verdict.json")


def sparse(tmp_path):
    return sparse_file(tmp_path / "verdict.json")


# A file no verdict is, however it is given, and the words its line ends with.
NOT_A_FILE = {
    "a-fifo": (fifo, "a FIFO, not a regular file"),
    "larger-than-any-report": (sparse, "larger than 64 MiB, which no report is"),
}


@pytest.mark.parametrize("name", sorted(NOT_A_FILE))
@pytest.mark.parametrize("command", ["summary", "releases"])
def test_a_report_that_is_no_regular_file_is_refused_not_waited_on(
    tmp_path, capsys, name, command
):
    make, reason = NOT_A_FILE[name]
    bad = make(tmp_path)
    assert cli.main(["ci", command, str(bad)]) == 9
    assert capsys.readouterr().err == f"error: {bad}: {reason}\n"


@pytest.mark.parametrize("name", sorted(NOT_A_FILE))
def test_export_refuses_a_verdict_that_is_no_regular_file(
    tmp_path, monkeypatch, cache, capsys, name
):
    make_target(tmp_path, monkeypatch)
    make, reason = NOT_A_FILE[name]
    verdict = make(tmp_path)
    assert export(tmp_path / "mails", "--verdict", str(verdict)) == 9
    assert capsys.readouterr().err.splitlines()[-1] == f"error: {verdict}: {reason}"
    assert not (tmp_path / "mails").exists()
