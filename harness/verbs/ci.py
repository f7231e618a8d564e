"""`ci`: the hosted CI's matrix from harness/targets.toml, and its verdict table.

    python -m harness ci matrix              the matrix as one line of JSON
    python -m harness ci summary REPORT...   verdict JSON as a Markdown table
    python -m harness ci releases REPORT...  the claimed targets' table of
                                             docs/releases.md, from verdicts

The matrix has one entry per target and tier of the pin file:
`{"include": [{"target", "tier", "toxenv", "source_id"}, ...]}`, where toxenv
is the tox environment that runs the verdict and source_id names the pristine
source for cache keys (the sdist's sha256, a git source's commit, "" for a
local path). The workflow (.github/workflows/ci.yml) reads it with
`fromJSON`, so a target added to the pin file is in CI without editing the
workflow. `tox_environments` declares the same environments to tox
(toxfile.py), so tox.ini names no target either.

Only the standard library is needed: the workflow runs this before any install.
"""

import json
from pathlib import Path

from harness.contract import CLASSES
from harness.targets import Target, load_targets
from harness.verdict import COLUMNS


def register(parser) -> None:
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    commands.add_parser(
        "matrix", help="every target x tier of harness/targets.toml, as JSON"
    ).set_defaults(run=print_matrix)
    summary_parser = commands.add_parser(
        "summary", help="render verdict JSON reports as a Markdown table"
    )
    summary_parser.add_argument("reports", nargs="+", type=Path, metavar="REPORT")
    summary_parser.set_defaults(run=print_summary)
    releases_parser = commands.add_parser(
        "releases",
        help="render verdict JSON reports as docs/releases.md's table of claimed "
        "targets: outcomes, class counts, and each row's date, revision and machine",
    )
    releases_parser.add_argument("reports", nargs="+", type=Path, metavar="REPORT")
    releases_parser.set_defaults(run=print_releases)


def print_matrix(args) -> int:
    print(json.dumps(matrix(load_targets())))
    return 0


def print_summary(args) -> int:
    from harness.errors import UnreadableInput

    table, unreadable = summary(args.reports)
    print(table)
    return UnreadableInput.exit_code if unreadable else 0


def print_releases(args) -> int:
    from harness.verdict import read_verdict

    print(releases_table([read_verdict(report) for report in args.reports]))
    return 0


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
                {
                    "GPU_CHECK_TARGET": target.name,
                    "GPU_CHECK_VLLM": target.wheels["gpu"],
                },
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
        if not report.exists():
            notes.append(
                f"No verdict at `{report}`: the run stopped before writing one "
                "(see the job's log)."
            )
            continue
        try:
            row = read_verdict(report).row()
        except UnreadableInput as exc:
            error(str(exc))
            notes.append(f"Unreadable verdict at `{report}`: {exc}")
            unreadable += 1
            continue
        rows.append([row[column] for column in COLUMNS])
    lines = []
    if rows:
        lines.append(_table_line(COLUMNS))
        lines.append(_table_line(["---"] * len(COLUMNS)))
        lines += [_table_line(row) for row in rows]
    return "\n".join(lines + notes), unreadable


def _table_line(cells) -> str:
    return "| " + " | ".join(cells) + " |"


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
    lines = [_table_line(RELEASE_COLUMNS), _table_line(["---"] * len(RELEASE_COLUMNS))]
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
        lines.append(_table_line([cells[column] for column in RELEASE_COLUMNS]))
    return "\n".join(lines)
