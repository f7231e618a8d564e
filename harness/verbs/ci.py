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
from harness.targets import Target, load_targets
from harness.verdict import COLUMNS


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
        lines.append(_table_line(COLUMNS))
        lines.append(_table_line(["---"] * len(COLUMNS)))
        lines += [_table_line(row) for row in rows]
    return "\n".join(lines + notes), unreadable


def _table_line(cells) -> str:
    return "| " + " | ".join(map(_cell, cells)) + " |"


def _cell(text: str) -> str:
    """A cell that stays one cell of one row, whatever a report holds: its
    pipes escaped, its line breaks <br>, no HTML tag of its own, no terminal
    escape (harness.log.shown)."""
    from harness.log import shown

    lines = (shown(line).replace("<", "&lt;") for line in text.splitlines())
    return "<br>".join(line.replace("|", "\\|") for line in lines)


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


# A row per session of an e2e report (harness.engine.e2e): what the stream
# checker counted, the router fidelity, and where the run was taken.
E2E_COLUMNS = (
    "target",
    "engine",
    "session",
    "fixes",
    "C1",
    "C2",
    "C3",
    "by group",
    "parent never reported",
    "hash-block stores",
    "content tree exact %",
    "over (mean)",
    "under (mean)",
    "hash set exact %",
    "resets late",
    "session time",
    "tests",
    "run time",
    "date",
    "revision",
    "machine",
)
STREAM_RULES = ("C1", "C2", "C3")
OUTCOMES = ("exact", "over", "under")  # of a probe, which add up to the probes
E2E_KIND = "e2e"


def read_e2e_report(path: Path) -> dict | None:
    """The e2e report at ``path``, checked to have every field the table
    reads; None for a file that is not one (a verdict, say: `read_verdict`
    reads and judges those). UnreadableInput for an e2e report that lacks a
    field or has one of the wrong kind."""
    from harness.errors import UnreadableInput
    from harness.verdict import read_small, strict_json

    try:
        data = strict_json(read_small(path))
    except (OSError, ValueError):
        return None  # read_verdict says what is wrong with it
    if not isinstance(data, dict) or data.get("kind") != E2E_KIND:
        return None
    try:
        for row in e2e_rows(data):
            _table_line(row)  # every cell is text
        _version_key(data["target"])
        for label, session in data["sessions"].items():
            for name in ("fidelity", "hash_set_fidelity"):
                if why := _impossible(session.get(name)):
                    raise ValueError(f"sessions.{label}.{name} {why}")
    except KeyError as exc:
        raise UnreadableInput(f"{path}: not an e2e report: no field {exc}") from None
    except (TypeError, AttributeError, ValueError, ArithmeticError) as exc:
        raise UnreadableInput(
            f"{path}: not an e2e report: a field of the wrong kind or value ({exc})"
        ) from None
    return data


def e2e_table(reports: list[dict]) -> str:
    """A row per session of each report (pristine, then each tier); reports
    by target."""
    lines = [_table_line(E2E_COLUMNS), _table_line(["---"] * len(E2E_COLUMNS))]
    for report in sorted(reports, key=lambda r: _version_key(r["target"])):
        lines += [_table_line(row) for row in e2e_rows(report)]
    return "\n".join(lines)


def _impossible(tally: dict | None) -> str | None:
    """Why no tally of probes is ``tally`` (a share over 100 % or below 0)."""
    tally = tally or {}
    for key, value in tally.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return f"has {key} {value!r}, not a count"
    found = [f"{key} {tally.get(key, 0)}" for key in OUTCOMES]
    if tally and sum(tally.get(key, 0) for key in OUTCOMES) != tally.get("probes"):
        return f"has {', '.join(found)} of {tally.get('probes')} probes"
    return None


def _exact_cell(fidelity: dict | None) -> str:
    if not fidelity or not fidelity["probes"]:
        return "-"
    return f"{100 * fidelity['exact'] / fidelity['probes']:.1f}"


def _version_key(target: str) -> tuple:
    """0.9 before 0.27 before main."""
    parts = target.split(".")
    if all(part.isdigit() for part in parts):
        return (0, tuple(int(part) for part in parts))
    return (1, (target,))


def e2e_rows(report: dict) -> list[list[str]]:
    where = report["provenance"]
    tests = report["tests"]
    rows = []
    for label in ("pristine", *report["tiers"]):
        session = report["sessions"][label]
        rules = session["violations"]
        fidelity = session["fidelity"]
        cells = {
            "target": report["target"],
            "engine": report["engine"],
            "session": label,
            "fixes": ", ".join(report["fixes"][label]) if label != "pristine" else "-",
            **{rule: str(rules.get(rule, 0)) for rule in STREAM_RULES},
            "by group": "; ".join(
                f"{group}: {_rule_counts(counts)}"
                for group, counts in session["by_group"].items()
            ),
            "parent never reported": str(session["unreported_parent"]),
            "hash-block stores": str(session["hash_block_stores"]),
            "content tree exact %": _exact_cell(fidelity),
            "over (mean)": _mean_cell(fidelity["over"], fidelity["over_tokens"]),
            "under (mean)": _mean_cell(fidelity["under"], fidelity["under_tokens"]),
            # reports written before the judge asked the hash set have none
            "hash set exact %": _exact_cell(session.get("hash_set_fidelity")),
            # a reset whose AllBlocksCleared reached the stream only after the
            # next request was sent (rule C9)
            "resets late": f"{session['late_resets']} of {session['resets']}",
            "session time": f"{session['wall_seconds']:.0f} s",
            "tests": _test_counts(tests),
            "run time": f"{report['wall_seconds']:.0f} s",
            **{
                key: where.get(key, "not recorded")
                for key in ("date", "revision", "machine")
            },
        }
        rows.append([cells[column] for column in E2E_COLUMNS])
    return rows


def _rule_counts(counts: dict) -> str:
    """{"C3": 1, "C1": 3} as "C1 3, C3 1"."""
    return ", ".join(f"{rule} {n}" for rule, n in sorted(counts.items())) or "none"


def _test_counts(tests: dict | None) -> str:
    """{"passed": 24, "failed": 1} as "24 passed, 1 failed"."""
    if tests is None:
        return "not run"
    order = ("passed", "failed", "error", "skipped")
    names = sorted(tests, key=lambda n: (order.index(n) if n in order else 9, n))
    return ", ".join(f"{tests[name]} {name}" for name in names) or "none"


def _mean_cell(count: int, tokens: int) -> str:
    return f"{count} ({tokens / count:.0f})" if count else "0 (0)"
