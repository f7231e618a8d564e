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
    summary_parser.add_argument("reports", nargs="*", type=Path, metavar="REPORT")
    summary_parser.set_defaults(run=print_summary)
    releases_parser = commands.add_parser(
        "releases",
        help="render verdict JSON reports as docs/releases.md's table of claimed "
        "targets (outcomes, class counts), and e2e reports (reports/e2e-*.json) "
        "as its table of real engines (counts per rule and group per session, "
        "router fidelity), each row with its date, revision and machine",
    )
    releases_parser.add_argument("reports", nargs="*", type=Path, metavar="REPORT")
    releases_parser.set_defaults(run=print_releases)
    for command in (summary_parser, releases_parser):
        command.epilog = (
            "Without REPORT: this checkout's reports in the harness cache, each "
            "verdict only if it was judged on this checkout's series and harness "
            "code. A REPORT that records another tree is left out, with a line."
        )


def print_matrix(args) -> int:
    print(json.dumps(matrix(load_targets())))
    return 0


def print_e2e_matrix(args) -> int:
    print(json.dumps(e2e_matrix(load_targets())))
    return 0


def print_summary(args) -> int:
    from harness.errors import UnreadableInput

    reports, found = _reports(args.reports)
    table, unreadable = summary(reports, strict=found is not None)
    print(_none_of_this_tree(found) if not table and found else table)
    return UnreadableInput.exit_code if unreadable else 0


def print_releases(args) -> int:
    """The tables of the reports that can be read; a line (status 9) for each
    that cannot, which never hides the others' rows."""
    from harness.errors import UnreadableInput
    from harness.log import error, warning
    from harness.verdict import read_verdict

    reports, found = _reports(args.reports)
    verdicts, engines, status = [], [], 0
    for report in reports:
        try:
            if (e2e := read_e2e_report(report)) is not None:
                engines.append(e2e)
            elif why := _left_out(verdict := read_verdict(report), bool(found)):
                warning(f"the verdict {report} is not of this tree ({why}); left out")
            else:
                verdicts.append(verdict)
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
    elif found is not None:
        warning(_none_of_this_tree(found))
    return status


def _reports(given: list[Path]) -> tuple[list[Path], Path | None]:
    """The reports to render: those given; else every report in this
    checkout's folder of the cache, and that folder."""
    if given:
        return given, None
    from harness import cache

    found = cache.reports()
    return sorted(found.glob("*.json")) if found.is_dir() else [], found


def _none_of_this_tree(found: Path) -> str:
    return (
        f"No report of this checkout's tree in {found}: `python -m harness test` "
        f"writes one."
    )


def _left_out(verdict, strict: bool) -> str | None:
    """Why ``verdict`` is left out of a table: it was not judged on this
    checkout's tree (harness.series.judged). One found in this checkout's
    reports (``strict``) must record this tree; one given by name that
    records no tree (an older one) is rendered as it is."""
    from harness.errors import UserError
    from harness.series.judged import TREE_KEYS, not_of_tree, tree_key
    from harness.targets import get_target

    if not strict and not any(key in verdict.provenance for key in TREE_KEYS):
        return None
    try:
        key = tree_key(get_target(verdict.target), verdict.tier)
    except UserError as exc:
        return f"this checkout cannot tell: {exc}"
    return not_of_tree(verdict.provenance, key)


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


def summary(reports: list[Path], strict: bool = False) -> tuple[str, int]:
    """A Markdown table with a row per report, then a line per missing,
    unreadable or left-out report (`_left_out`; ``strict``: reports this
    checkout's cache holds); and how many were unreadable (each a line on
    stderr too). A bad report never hides the rows of the good ones."""
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
            verdict = read_verdict(report)
        except UnreadableInput as exc:
            error(str(exc))
            notes.append(_one_line(f"Unreadable verdict at `{report}`: {exc}"))
            unreadable += 1
            continue
        if why := _left_out(verdict, strict):
            left_out = f"Verdict at `{report}` is not of this tree: {why}."
            notes.append(_one_line(left_out))
            continue
        row = verdict.row()
        rows.append([row[column] for column in COLUMNS])
    lines = []
    if rows:
        lines.append(table_line(COLUMNS))
        lines.append(table_line(["---"] * len(COLUMNS)))
        lines += [table_line(row) for row in rows]
    return "\n".join(lines + notes), unreadable


def _one_line(text: str) -> str:
    from harness.log import shown

    return shown(" ".join(text.splitlines()))


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
    "triton gate",
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
            # Recorded from 0.34's gate on; a verdict before it had none to pass.
            "triton gate": verdict.provenance.get("triton gate", "none"),
        }
        lines.append(table_line([cells[column] for column in RELEASE_COLUMNS]))
    return "\n".join(lines)
