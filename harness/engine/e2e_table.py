"""The table of real engines: a row per session of an e2e report
(harness.engine.e2e), as `python -m harness ci releases` renders it beside
the verdicts' table (docs/releases.md).

An e2e report is checked as it is read (`read_e2e_report`): every field the
table reads, of the kind the run writes, and router tallies that a run can
give (exact, over and under adding up to the probes). Only the standard
library: CI renders reports before any install.
"""

from pathlib import Path

from harness.verdict import table_line

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
            table_line(row)  # every cell is text
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
    lines = [table_line(E2E_COLUMNS), table_line(["---"] * len(E2E_COLUMNS))]
    for report in sorted(reports, key=lambda r: _version_key(r["target"])):
        lines += [table_line(row) for row in e2e_rows(report)]
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
