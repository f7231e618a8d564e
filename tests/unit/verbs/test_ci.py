import configparser
import importlib.util
import json
import re

import pytest
from support import REPO_ROOT
from support.trees import target_table, write_pins

from harness import cli
from harness.contract import CLASSES
from harness.engine.engine import DEFAULT_TARGET
from harness.targets import load_targets
from harness.verbs.ci import (
    RELEASE_COLUMNS,
    e2e_matrix,
    matrix,
    releases_table,
    summary,
    tox_environments,
)
from harness.verdict import COLUMNS, Conformance, Verdict

WORKFLOW = REPO_ROOT / ".github" / "workflows" / "ci.yml"
SHA = "ab" * 32
COMMIT = "c0" * 20


def tox_ini() -> configparser.ConfigParser:
    config = configparser.ConfigParser(interpolation=None)
    config.read(REPO_ROOT / "tox.ini")
    return config


def tox_ini_envs() -> set[str]:
    """The environments tox.ini itself names (toxfile.py adds the targets')."""
    return {
        section.removeprefix("testenv:")
        for section in tox_ini().sections()
        if section.startswith("testenv:")
    }


def toxfile():
    """The tox plugin at the top of the checkout, imported as tox would."""
    spec = importlib.util.spec_from_file_location("toxfile", REPO_ROOT / "toxfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_workflow_runs_the_generated_matrix():
    workflow = WORKFLOW.read_text()
    assert "matrix=$(python -m harness ci matrix)" in workflow
    assert "matrix: ${{ fromJSON(needs.matrix.outputs.matrix) }}" in workflow
    assert "TOX_ENV: ${{ matrix.toxenv }}" in workflow
    assert 'tox -e "$TOX_ENV" -- --report "$VERDICT"' in workflow


def test_workflow_runs_the_generated_e2e_matrix_and_renders_its_reports():
    workflow = WORKFLOW.read_text()
    assert "e2e=$(python -m harness ci e2e-matrix)" in workflow
    assert "matrix: ${{ fromJSON(needs.matrix.outputs.e2e) }}" in workflow
    assert 'tox -e "$TOX_ENV" -- --e2e-report "$E2E_REPORT"' in workflow
    assert 'python -m harness ci releases "$E2E_REPORT"' in workflow


def test_the_e2e_matrix_is_every_target_with_a_cpu_wheel_but_the_checks_one():
    targets = load_targets()
    entries = e2e_matrix(targets)["include"]
    with_wheel = [name for name, t in targets.items() if "cpu" in t.wheels]
    assert [entry["target"] for entry in entries] == [
        name for name in with_wheel if name != DEFAULT_TARGET
    ]
    assert DEFAULT_TARGET in with_wheel  # tox -e e2e, in the checks job
    for entry in entries:
        target = targets[entry["target"]]
        assert entry["toxenv"] == f"e2e-{target.name}"
        assert entry["wheel_sha256"] == target.wheel("cpu").sha256


def test_main_prints_the_e2e_matrix_as_one_line_of_json(capsys):
    assert cli.main(["ci", "e2e-matrix"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert json.loads(out) == e2e_matrix(load_targets())


def test_matrix_is_every_target_and_tier_of_the_pin_file():
    targets = load_targets()
    expected = [
        (name, tier) for name, target in targets.items() for tier in target.series
    ]
    entries = matrix(targets)["include"]
    assert [(entry["target"], entry["tier"]) for entry in entries] == expected
    assert ("0.30", "strict") in expected
    for entry in entries:
        assert entry["source_id"] == targets[entry["target"]].source.sha256


def test_every_toxenv_the_workflow_runs_is_declared():
    declared = tox_environments(load_targets())
    toxenvs = {entry["toxenv"] for entry in matrix(load_targets())["include"]}
    assert toxenvs <= set(declared), toxenvs - set(declared)
    assert {declared[env][0] for env in toxenvs} == {"verdict"}
    e2e = {entry["toxenv"] for entry in e2e_matrix(load_targets())["include"]}
    assert e2e and e2e <= set(declared), e2e - set(declared)
    assert {declared[env][0] for env in e2e} == {"e2e-target"}
    checks = re.search(r"toxenv: \[(.*)\]", WORKFLOW.read_text())[1].split(", ")
    assert set(checks) == {"harness", "lint", "consumers", "e2e"}
    assert set(checks) <= tox_ini_envs()
    assert "tox -e vllm-main-gpu" in WORKFLOW.read_text()
    assert declared["vllm-main-gpu"] == (
        "gpu-check",
        {"GPU_CHECK_TARGET": "main"},
    )


def test_the_target_environments_come_from_tox_ini_sections_with_the_matrix_label():
    config = tox_ini()
    sections = {section for section, _ in tox_environments(load_targets()).values()}
    assert sections == {"verdict", "gpu-check", "e2e-target"}
    assert sections <= set(config.sections())
    assert config["verdict"]["labels"].strip() == "matrix"
    assert config["e2e-target"]["labels"].strip() == "e2e-targets"
    assert "labels" not in config["gpu-check"]
    assert "labels" not in config["tox"], "the matrix label comes from [verdict]"


def test_toxfile_declares_the_target_environments_to_tox():
    plugin = toxfile()
    assert plugin.tox_extend_envs() == list(tox_environments(load_targets()))
    assert plugin.ENVIRONMENTS["vllm-0.32-strict"] == (
        "verdict",
        {"SERIES_TARGET": "0.32", "SERIES_TIER": "strict"},
    )
    assert plugin.ENVIRONMENTS["e2e-0.28"] == (
        "e2e-target",
        {"HARNESS_E2E_TARGET": "0.28"},
    )


def test_an_e2e_environment_for_each_target_with_a_cpu_wheel_only():
    targets = load_targets()
    declared = tox_environments(targets)
    e2e = {name for name, (section, _) in declared.items() if section == "e2e-target"}
    assert e2e == {
        target.e2e_toxenv() for target in targets.values() if "cpu" in target.wheels
    }
    assert "e2e-main" not in e2e  # 0.34.0 has no CPU build
    assert "e2e-0.26" not in e2e  # its wheel asks for torch 2.11.0 (docs/e2e.md)
    env_list = tox_ini()["tox"]["env_list"].replace(",", " ").split()
    assert not e2e & set(env_list)


def test_a_new_target_enters_the_matrix_with_its_tiers(tmp_path):
    default_only = (
        target_table(f'{{ sdist = "vllm==9.9.9", sha256 = "{SHA}" }}')
        .replace(', strict = "series.strict"', "")
        .replace(', strict = ["K1", "K2"]', "")
    )
    git = target_table(f'{{ git = "/srv/vllm.git", commit = "{COMMIT}" }}')
    path = target_table('{ path = "vendor/vllm" }')
    pins = write_pins(
        tmp_path,
        default_only
        + git.replace("[targets.t]", "[targets.g]")
        + path.replace("[targets.t]", '[targets."1.0"]'),
    )
    assert matrix(load_targets(pins)) == {
        "include": [
            {"target": "t", "tier": "default", "toxenv": "vllm-t", "source_id": SHA},
            {"target": "g", "tier": "default", "toxenv": "vllm-g", "source_id": COMMIT},
            {
                "target": "g",
                "tier": "strict",
                "toxenv": "vllm-g-strict",
                "source_id": COMMIT,
            },
            {"target": "1.0", "tier": "default", "toxenv": "vllm-1.0", "source_id": ""},
            {
                "target": "1.0",
                "tier": "strict",
                "toxenv": "vllm-1.0-strict",
                "source_id": "",
            },
        ]
    }


def test_main_prints_the_matrix_as_one_line_of_json(capsys):
    assert cli.main(["ci", "matrix"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert json.loads(out) == matrix(load_targets())


def a_verdict(**changes) -> Verdict:
    fields = {
        "target": "main",
        "tier": "strict",
        "selection": "ci",
        "pristine": {"t::a": "passed", "t::b": "passed", "t::env": "failed"},
        "patched": {
            "t::a": "passed",
            "t::b": "failed",
            "t::env": "error",
            "t::new": "failed",
            "t::new2": "passed",
        },
        "conformance": Conformance("passed", 12, 0),
        "wall_seconds": 125.4,
    }
    return Verdict(**(fields | changes))


def rendered_row(verdict: Verdict) -> dict[str, str]:
    """The row `python -m harness test` prints, column name -> value."""
    header, values = verdict.render().splitlines()[:2]
    return dict(
        zip(re.split(r"\s{2,}", header), re.split(r"\s{2,}", values), strict=True)
    )


def test_summary_is_the_verdict_row_as_markdown(tmp_path):
    verdict = a_verdict()
    report = tmp_path / "vllm-main-strict.json"
    report.write_text(json.dumps(verdict.as_json()))
    lines = summary([report])[0].splitlines()
    assert lines[0] == "| " + " | ".join(COLUMNS) + " |"
    assert lines[1] == "|" + " --- |" * len(COLUMNS)
    cells = dict(zip(COLUMNS, lines[2].strip("| ").split(" | "), strict=True))
    assert cells == rendered_row(verdict) | {"selection": "ci", "verdict": "FAIL"}
    assert cells["regressions"] == "1"
    assert cells["added tests"] == "2 (1 failing)"
    assert cells["conformance pass/fail"] == "12/0 passed"
    assert cells["wall time"] == "2m05s"
    assert len(lines) == 3


def test_summary_rows_in_report_order_then_missing_reports(tmp_path, capsys):
    clean = {"t::a": "passed", "t::b": "passed", "t::env": "failed"}
    passing = a_verdict(patched=clean, conformance=Conformance("passed", 3, 0))
    no_suite = a_verdict(patched=clean, conformance=Conformance("not present"))
    reports = [tmp_path / "passing.json", tmp_path / "no-suite.json"]
    for report, verdict in zip(reports, (passing, no_suite), strict=True):
        report.write_text(json.dumps(verdict.as_json()))
    missing = tmp_path / "vllm-0.30.json"
    assert cli.main(["ci", "summary", *map(str, reports), str(missing)]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [
        dict(zip(COLUMNS, line.strip("| ").split(" | "), strict=True))
        for line in lines[2:4]
    ]
    assert rows[0] == rendered_row(passing) | {"selection": "ci", "verdict": "PASS"}
    assert rows[1] == rendered_row(no_suite) | {"selection": "ci", "verdict": "FAIL"}
    assert rows[1]["conformance pass/fail"] == "not present"
    assert lines[4:] == [
        f"No verdict at `{missing}`: the run stopped before writing one "
        "(see the job's log)."
    ]


def test_summary_of_only_missing_reports_has_no_table(tmp_path):
    assert summary([tmp_path / "none.json"])[0].startswith("No verdict at ")


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("{", "not JSON (Expecting property name enclosed in double quotes: "),
        ("[1, 2]", "a JSON list, not an object"),
        ('{"target": "main"}', "no field 'conformance'"),
        (None, "a directory, not a regular file"),
    ],
    ids=["not-json", "a-list", "missing-fields", "a-directory"],
)
@pytest.mark.hostile
def test_a_bad_verdict_is_one_line_and_keeps_the_good_rows(
    tmp_path, capsys, content, why
):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(a_verdict().as_json()))
    bad = tmp_path / "bad.json"
    if content is None:
        bad.mkdir()
    else:
        bad.write_text(content)
    assert cli.main(["ci", "summary", str(bad), str(good)]) == 9
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert line.startswith(f"error: {bad}: ")
    assert why in line
    lines = captured.out.splitlines()
    assert len(lines) == 4
    assert lines[2].startswith("| main | strict | ci |")
    assert lines[3] == f"Unreadable verdict at `{bad}`: {line.removeprefix('error: ')}"


@pytest.mark.hostile
def test_a_verdict_with_fields_of_the_wrong_kind_is_unreadable(tmp_path, capsys):
    data = a_verdict().as_json()
    data["patched"]["outcomes"] = ["not", "a", "mapping"]
    report = tmp_path / "odd.json"
    report.write_text(json.dumps(data))
    assert cli.main(["ci", "summary", str(report)]) == 9
    assert capsys.readouterr().err.startswith(
        f"error: {report}: not a verdict of `python -m harness test`: a field of "
        f"the wrong kind ("
    )


PROVENANCE = {
    "date": "2026-11-30 14:00 UTC",
    "revision": "abc123def456",
    "machine": "x86_64, 2 cores, Python 3.11.9, torch 2.13.0",
}


def test_releases_rows_carry_class_counts_and_where_they_were_taken(tmp_path, capsys):
    report = {
        "classes": {
            cls: {"pristine": 10 + n, "patched": 0 if cls == "K1" else 10 + n}
            for n, cls in enumerate(CLASSES)
        },
        "ancestry_overlap": 4,
    }
    verdicts = [
        a_verdict(
            tier=tier,
            selection=selection,
            conformance=Conformance("passed", 12, 0, report),
        )
        for tier, selection in (("strict", "full"), ("default", "ci"), ("strict", "ci"))
    ]
    paths = []
    for verdict in verdicts:
        paths.append(tmp_path / f"{verdict.tier}-{verdict.selection}.json")
        paths[-1].write_text(json.dumps(verdict.as_json() | {"provenance": PROVENANCE}))
    assert cli.main(["ci", "releases", *map(str, paths)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| " + " | ".join(RELEASE_COLUMNS) + " |"
    rows = [
        dict(zip(RELEASE_COLUMNS, line.strip("| ").split(" | "), strict=True))
        for line in lines[2:]
    ]
    assert [(row["tier"], row["selection"]) for row in rows] == [
        ("default", "ci"),
        ("strict", "ci"),
        ("strict", "full"),
    ]
    assert rows[0]["K1"] == "10 -> 0" and rows[0]["K5"] == "14 -> 14"
    assert rows[0]["ancestry overlap"] == "4"
    assert rows[0]["wall time"] == "2m05s"
    assert {key: rows[0][key] for key in PROVENANCE} == PROVENANCE


def test_releases_says_when_a_verdict_recorded_no_provenance():
    [row] = releases_table([a_verdict()]).splitlines()[2:]
    cells = dict(zip(RELEASE_COLUMNS, row.strip("| ").split(" | "), strict=True))
    assert cells["revision"] == "not recorded"
    assert cells["K1"] == "-"


# --------------------------------------------------------------------------
# Only verdicts of this checkout's tree
# --------------------------------------------------------------------------


def other_tree(path):
    """The verdict at ``path``, as judged by other harness code."""
    data = json.loads(path.read_text())
    data["provenance"]["harness_sha256"] = "0" * 64
    path.write_text(json.dumps(data))
    return path


@pytest.mark.hostile
@pytest.mark.parametrize("command", ["summary", "releases"])
def test_without_reports_this_checkouts_verdicts_of_this_tree_are_rendered(
    tmp_path, monkeypatch, cache, capsys, command
):
    from support.export import make_target, write_verdict

    from harness import cache as harness_cache

    make_target(tmp_path, monkeypatch)
    assert cli.main(["ci", command]) == 0
    none = (
        f"No report of this checkout's tree in {harness_cache.reports()}: "
        "`python -m harness test` writes one."
    )
    captured = capsys.readouterr()
    if command == "summary":
        assert captured.out == none + "\n"
    else:
        assert captured.err == f"warning: {none}\n"
    write_verdict()
    other_tree(write_verdict(tier="strict"))
    older = harness_cache.report("t", "default", "full")
    write_verdict(older, judged_here=False)
    assert cli.main(["ci", command]) == 0
    out, err = capsys.readouterr()
    rows = [line for line in out.splitlines() if line.startswith("| t |")]
    assert [row.split(" | ")[1:3] for row in rows] == [["default", "ci"]]
    why = {
        older: "it records no digest of its series and harness (an older verdict)",
        harness_cache.report("t", "strict", "ci"): (
            "the harness code that judged it differs from this checkout's"
        ),
    }
    if command == "summary":
        assert out.splitlines()[3:] == [
            f"Verdict at `{path}` is not of this tree: {reason}."
            for path, reason in why.items()
        ]
    else:
        assert err.splitlines() == [
            f"warning: the verdict {path} is not of this tree ({reason}); left out"
            for path, reason in why.items()
        ]


@pytest.mark.hostile
def test_a_named_verdict_of_another_tree_is_left_out_one_of_none_rendered(
    tmp_path, monkeypatch, cache, capsys
):
    from support.export import make_target, write_verdict

    make_target(tmp_path, monkeypatch)
    older = write_verdict(tmp_path / "older.json", judged_here=False)
    other = other_tree(write_verdict(tmp_path / "other.json"))
    assert cli.main(["ci", "summary", str(older), str(other)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("| t | default | ci |")
    assert lines[3:] == [
        f"Verdict at `{other}` is not of this tree: the harness code that judged "
        "it differs from this checkout's."
    ]
