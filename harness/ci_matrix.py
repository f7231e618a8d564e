"""The hosted CI's matrix, generated from harness/targets.toml, and its summary.

    python -m harness.ci_matrix                   the matrix as one line of JSON
    python -m harness.ci_matrix summary REPORT... verdict JSON as a Markdown table

The matrix has one entry per target and tier of the pin file:
`{"include": [{"target", "tier", "toxenv", "source_id"}, ...]}`, where toxenv
is the tox environment that runs the verdict (`vllm-TARGET` for the default
tier, `vllm-TARGET-TIER` for another) and source_id names the pristine source
for cache keys (the sdist's sha256, a git source's commit, "" for a local
path). The workflow (.github/workflows/ci.yml) reads it with `fromJSON`, so a
target added to the pin file is in CI without editing the workflow.

Only the standard library is needed: the workflow runs this before any install.
"""

import argparse
import json
import sys
from pathlib import Path

from harness.cli import UserError
from harness.targets import GitSource, SdistSource, Target, load_targets
from harness.verdict import FAILING

COLUMNS = (
    "target",
    "tier",
    "selection",
    "pristine pass/fail",
    "patched pass/fail",
    "regressions",
    "added tests",
    "environmental",
    "conformance pass/fail",
    "wall time",
    "verdict",
)


def toxenv(target: str, tier: str) -> str:
    return f"vllm-{target}" if tier == "default" else f"vllm-{target}-{tier}"


def source_id(target: Target) -> str:
    source = target.source
    if isinstance(source, SdistSource):
        return source.sha256
    if isinstance(source, GitSource):
        return source.commit
    return ""


def matrix(targets: dict[str, Target]) -> dict:
    return {
        "include": [
            {
                "target": target.name,
                "tier": tier,
                "toxenv": toxenv(target.name, tier),
                "source_id": source_id(target),
            }
            for target in targets.values()
            for tier in target.series
        ]
    }


def summary_row(verdict: dict) -> list[str]:
    """The cells of one verdict, as `python -m harness test` prints its row."""
    pristine = verdict["pristine"]["tally"]
    patched = verdict["patched"]["tally"]
    added = str(len(verdict["added"]))
    failing_added = sum(outcome in FAILING for outcome in verdict["added"].values())
    if failing_added:
        added += f" ({failing_added} failing)"
    conformance = verdict["conformance"]
    conformance_cell = conformance["status"]
    if conformance["status"] not in ("not present", "no tests"):
        conformance_cell = (
            f"{conformance['passed']}/{conformance['failed']} {conformance['status']}"
        )
    minutes, seconds = divmod(round(verdict["wall_seconds"]), 60)
    return [
        verdict["target"],
        verdict["tier"],
        verdict["selection"],
        f"{pristine['passed']}/{pristine['failed']}",
        f"{patched['passed']}/{patched['failed']}",
        str(len(verdict["regressions"])),
        added,
        str(len(verdict["environmental"])),
        conformance_cell,
        f"{minutes}m{seconds:02d}s",
        "PASS" if verdict["passed"] else "FAIL",
    ]


def summary(reports: list[Path]) -> str:
    """A Markdown table with a row per report, then a line per missing report."""
    rows, missing = [], []
    for report in reports:
        if report.is_file():
            rows.append(summary_row(json.loads(report.read_text())))
        else:
            missing.append(
                f"No verdict at `{report}`: the run stopped before writing one "
                "(see the job's log)."
            )
    lines = []
    if rows:
        lines.append(_table_line(COLUMNS))
        lines.append(_table_line(["---"] * len(COLUMNS)))
        lines += [_table_line(row) for row in rows]
    return "\n".join(lines + missing)


def _table_line(cells) -> str:
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.ci_matrix",
        description="Print the hosted CI's matrix of targets x tiers as JSON.",
    )
    verbs = parser.add_subparsers(dest="verb")
    summary_parser = verbs.add_parser(
        "summary", help="render verdict JSON reports as a Markdown table"
    )
    summary_parser.add_argument("reports", nargs="+", type=Path, metavar="REPORT")
    args = parser.parse_args(argv)
    if args.verb == "summary":
        print(summary(args.reports))
        return 0
    try:
        print(json.dumps(matrix(load_targets())))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
