"""`ci`: the hosted CI's matrix from harness/targets.toml, and its verdict table.

    python -m harness ci matrix              the matrix as one line of JSON
    python -m harness ci e2e-matrix          the e2e-TARGET environments CI runs,
                                             as one line of JSON
    python -m harness ci summary REPORT...   verdict JSON as a Markdown table
    python -m harness ci releases REPORT...  the claimed targets' tables of
                                             docs/releases.md, from verdicts
                                             and e2e reports

The matrix has one entry per target and tier of the pin file:
`{"include": [{"target", "tier", "toxenv", "source_id"}, ...]}`, where toxenv
is the tox environment that runs the verdict and source_id names the pristine
source for cache keys (the sdist's sha256, a git source's commit, "" for a
local path). The workflow (.github/workflows/ci.yml) reads it with
`fromJSON`, so a target added to the pin file is in CI without editing the
workflow. `tox_environments` declares the same environments to tox
(toxfile.py), so tox.ini names no target either. The e2e matrix has one entry
per target with a CPU wheel, `{"target", "toxenv", "wheel_sha256"}`, but for
the target that the `e2e` environment of the checks job runs already.

Only the standard library is needed: the workflow runs this before any install.
"""

import json
import os
from pathlib import Path

from harness.contract import CLASSES
from harness.engine.e2e_table import e2e_table, read_e2e_report
from harness.targets import Target, load_targets
from harness.verdict import COLUMNS, table_line


def register(parser) -> None:
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    commands.add_parser(
        "matrix", help="every target x tier of harness/targets.toml, as JSON"
    ).set_defaults(run=print_matrix)
    commands.add_parser(
        "e2e-matrix",
        help="the e2e-TARGET environments of the targets with a CPU wheel, as JSON",
    ).set_defaults(run=print_e2e_matrix)
    summary_parser = commands.add_parser(
        "summary", help="render verdict JSON reports as a Markdown table"
    )
    summary_parser.add_argument("reports", nargs="+", type=Path, metavar="REPORT")
    summary_parser.set_defaults(run=print_summary)
    releases_parser = commands.add_parser(
        "releases",
        help="render verdict JSON reports as docs/releases.md's table of claimed "
        "targets (outcomes, class counts), and e2e reports (reports/e2e-*.json) "
        "as its table of real engines (counts per rule and group per session, "
        "router fidelity), each row with its date, revision and machine",
    )
    releases_parser.add_argument("reports", nargs="+", type=Path, metavar="REPORT")
    releases_parser.set_defaults(run=print_releases)


def print_matrix(args) -> int:
    print(json.dumps(matrix(load_targets())))
    return 0


def print_e2e_matrix(args) -> int:
    print(json.dumps(e2e_matrix(load_targets())))
    return 0


def print_summary(args) -> int:
    from harness.errors import UnreadableInput

    table, unreadable = summary(args.reports)
    print(table)
    return UnreadableInput.exit_code if unreadable else 0


def print_releases(args) -> int:
    """The tables of the reports that can be read; a line (status 9) for each
    that cannot, which never hides the others' rows."""
    from harness.errors import UnreadableInput
    from harness.log import error
    from harness.verdict import read_verdict

    verdicts, engines, status = [], [], 0
    for report in args.reports:
        try:
            if (e2e := read_e2e_report(report)) is not None:
                engines.append(e2e)
            else:
                verdicts.append(read_verdict(report))
        except UnreadableInput as exc:
            error(str(exc))
            status = UnreadableInput.exit_code
    tables = []
    if verdicts:
        tables.append(releases_table(verdicts))
    if engines:
        tables.append(e2e_table(engines))
    if tables:
        print("\n\n".join(tables))
    return status


def matrix(targets: dict[str, Target]) -> dict:
    return {
        "include": [
            {
                "target": target.name,
                "tier": tier,
                "toxenv": target.toxenv(tier),
                "source_id": target.source.source_id(),
            }
            for target in targets.values()
            for tier in target.series
        ]
    }


def e2e_matrix(targets: dict[str, Target]) -> dict:
    """The e2e-TARGET environments for CI: every target with a CPU wheel but
    the one `tox -e e2e` runs (DEFAULT_TARGET, in the checks job)."""
    from harness.engine.engine import DEFAULT_TARGET

    return {
        "include": [
            {
                "target": target.name,
                "toxenv": target.e2e_toxenv(),
                "wheel_sha256": target.wheel("cpu").sha256,
            }
            for target in targets.values()
            if "cpu" in target.wheels and target.name != DEFAULT_TARGET
        ]
    }


def tox_environments(targets: dict[str, Target]) -> dict[str, tuple[str, dict]]:
    """Every tox environment a target has, for toxfile.py: name -> (the
    tox.ini section it is made from, its set_env)."""
    environments = {}
    for target in targets.values():
        for tier in target.series:
            environments[target.toxenv(tier)] = (
                "verdict",
                {"SERIES_TARGET": target.name, "SERIES_TIER": tier},
            )
        if "gpu" in target.wheels:
            environments[target.gpu_toxenv()] = (
                "gpu-check",
                {"GPU_CHECK_TARGET": target.name},
            )
        if "cpu" in target.wheels:
            environments[target.e2e_toxenv()] = (
                "e2e-target",
                {"HARNESS_E2E_TARGET": target.name},
            )
    return environments


def summary(reports: list[Path]) -> tuple[str, int]:
    """A Markdown table with a row per report, then a line per missing or
    unreadable report; and how many were unreadable (each a line on stderr
    too). A bad report never hides the rows of the good ones."""
    from harness.errors import UnreadableInput
    from harness.log import error
    from harness.verdict import read_verdict

    rows, notes, unreadable = [], [], 0
    for report in reports:
        if not os.path.lexists(report):
            missing = f"No verdict at `{report}`: the run stopped before writing one"
            notes.append(_one_line(f"{missing} (see the job's log)."))
            continue
        try:
            row = read_verdict(report).row()
        except UnreadableInput as exc:
            error(str(exc))
            notes.append(_one_line(f"Unreadable verdict at `{report}`: {exc}"))
            unreadable += 1
            continue
        rows.append([row[column] for column in COLUMNS])
    lines = []
    if rows:
        lines.append(table_line(COLUMNS))
        lines.append(table_line(["---"] * len(COLUMNS)))
        lines += [table_line(row) for row in rows]
    return "\n".join(lines + notes), unreadable


def _one_line(text: str) -> str:
    return " ".join(text.splitlines())


# A verdict's row up to its added tests, then the conformance suite's.
RELEASE_COLUMNS = (
    *COLUMNS[: COLUMNS.index("added tests") + 1],
    "conformance pass/fail",
    *CLASSES,
    "ancestry overlap",
    "wall time",
    "verdict",
    "date",
    "revision",
    "machine",
)


def releases_table(verdicts) -> str:
    """A row per verdict: its summary, the conformance suite's class counts
    (pristine -> patched) and where it was taken; rows by target, then tier."""
    lines = [table_line(RELEASE_COLUMNS), table_line(["---"] * len(RELEASE_COLUMNS))]
    for verdict in sorted(verdicts, key=lambda v: (v.target, v.tier, v.selection)):
        report = verdict.conformance.report or {}
        classes = report.get("classes", {})
        cells = {
            **verdict.row(),
            **{
                cls: "{pristine} -> {patched}".format(**classes[cls])
                if cls in classes
                else "-"
                for cls in CLASSES
            },
            "ancestry overlap": str(report.get("ancestry_overlap", "-")),
            **{
                key: verdict.provenance.get(key, "not recorded")
                for key in ("date", "revision", "machine")
            },
        }
        lines.append(table_line([cells[column] for column in RELEASE_COLUMNS]))
    return "\n".join(lines)
