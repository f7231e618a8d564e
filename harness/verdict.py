"""Pristine against patched: classify per-test outcomes and render the verdict.

An outcome is one of passed, failed, error, skipped (xfail counts as skipped),
or missing when a test that ran on one tree did not run on the other.

- regression: passed on the pristine tree, anything else on the patched one;
- environmental: failed (or errored) on both trees, so not the series' doing,
  but always shown;
- added: ran only on the patched tree; an added test that fails is a failure;
- changed: any other difference, shown for information (e.g. fixed tests).

`Verdict.row` is the one rendering of a verdict's summary: the row
`python -m harness test` prints, and the CI's Markdown table of verdicts read
back from their JSON (`Verdict.from_json`).
"""

from dataclasses import asdict, dataclass, field
from functools import cached_property

from harness.contract import title

FAILING = ("failed", "error")
# The cells of a verdict's row, in order.
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
# What `python -m harness test` prints of them: it says the selection and the
# verdict in full below the row.
PRINTED = tuple(column for column in COLUMNS if column not in ("selection", "verdict"))


@dataclass(frozen=True)
class Comparison:
    regressions: dict[str, tuple[str, str]] = field(default_factory=dict)
    environmental: dict[str, tuple[str, str]] = field(default_factory=dict)
    added: dict[str, str] = field(default_factory=dict)
    changed: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def failing_added(self) -> list[str]:
        return [test for test, outcome in self.added.items() if outcome in FAILING]


def compare(pristine: dict[str, str], patched: dict[str, str]) -> Comparison:
    comparison = Comparison()
    for test in sorted(pristine.keys() | patched.keys()):
        if test not in pristine:
            comparison.added[test] = patched[test]
            continue
        pair = (pristine[test], patched.get(test, "missing"))
        if pair[0] == "passed" and pair[1] != "passed":
            comparison.regressions[test] = pair
        elif pair[0] in FAILING and pair[1] in (*FAILING, "missing"):
            comparison.environmental[test] = pair
        elif pair[0] != pair[1]:
            comparison.changed[test] = pair
    return comparison


def tally(outcomes: dict[str, str]) -> dict[str, int]:
    values = list(outcomes.values())
    return {
        "passed": values.count("passed"),
        "failed": sum(values.count(outcome) for outcome in FAILING),
        "skipped": values.count("skipped"),
    }


@dataclass(frozen=True)
class Conformance:
    status: str  # passed, failed, no tests, not present
    passed: int = 0
    failed: int = 0
    report: dict | None = None  # what the suite wrote to HARNESS_CONFORMANCE_REPORT

    @property
    def ok(self) -> bool:
        return self.status == "passed"


@dataclass(frozen=True)
class Verdict:
    target: str
    tier: str
    selection: str
    pristine: dict[str, str]
    patched: dict[str, str]
    conformance: Conformance
    wall_seconds: float
    # Where and when it was taken: date (UTC), the checkout's revision, the
    # machine (`harness.suites.provenance`); empty in reports from before it.
    provenance: dict[str, str] = field(default_factory=dict)

    @cached_property
    def comparison(self) -> Comparison:
        return compare(self.pristine, self.patched)

    @property
    def passed(self) -> bool:
        comparison = self.comparison
        return (
            not comparison.regressions
            and not comparison.failing_added
            and self.conformance.ok
        )

    @classmethod
    def from_json(cls, data: dict) -> "Verdict":
        """The verdict `as_json` wrote."""
        conformance = data["conformance"]
        return cls(
            target=data["target"],
            tier=data["tier"],
            selection=data["selection"],
            pristine=data["pristine"]["outcomes"],
            patched=data["patched"]["outcomes"],
            conformance=Conformance(
                conformance["status"],
                conformance.get("passed", 0),
                conformance.get("failed", 0),
                conformance.get("report"),
            ),
            wall_seconds=data["wall_seconds"],
            provenance=dict(data.get("provenance", {})),
        )

    def as_json(self) -> dict:
        return {
            "target": self.target,
            "tier": self.tier,
            "selection": self.selection,
            "passed": self.passed,
            "wall_seconds": round(self.wall_seconds, 1),
            "pristine": {"tally": tally(self.pristine), "outcomes": self.pristine},
            "patched": {"tally": tally(self.patched), "outcomes": self.patched},
            **asdict(self.comparison),
            "conformance": asdict(self.conformance),
            "provenance": self.provenance,
        }

    def row(self) -> dict[str, str]:
        """Column -> cell, for every column of COLUMNS."""
        comparison = self.comparison
        pristine, patched = tally(self.pristine), tally(self.patched)
        minutes, seconds = divmod(round(self.wall_seconds), 60)
        added = str(len(comparison.added))
        if comparison.failing_added:
            added += f" ({len(comparison.failing_added)} failing)"
        conformance = self.conformance.status
        if self.conformance.status not in ("not present", "no tests"):
            conformance = (
                f"{self.conformance.passed}/{self.conformance.failed} {conformance}"
            )
        return {
            "target": self.target,
            "tier": self.tier,
            "selection": self.selection,
            "pristine pass/fail": f"{pristine['passed']}/{pristine['failed']}",
            "patched pass/fail": f"{patched['passed']}/{patched['failed']}",
            "regressions": str(len(comparison.regressions)),
            "added tests": added,
            "environmental": str(len(comparison.environmental)),
            "conformance pass/fail": conformance,
            "wall time": f"{minutes}m{seconds:02d}s",
            "verdict": "PASS" if self.passed else "FAIL",
        }

    def render(self) -> str:
        comparison = self.comparison
        row = self.row()
        cells = [(name, row[name], max(len(name), len(row[name]))) for name in PRINTED]
        lines = [
            "  ".join(name.ljust(width) for name, _, width in cells),
            "  ".join(value.ljust(width) for _, value, width in cells),
        ]
        sections = (
            (
                "regressions (passed on pristine, not on patched)",
                comparison.regressions,
            ),
            ("added tests (only on patched)", comparison.added),
            ("environmental (fail on both trees)", comparison.environmental),
            ("other outcome changes", comparison.changed),
        )
        for heading, tests in sections:
            if tests:
                lines += ["", f"{heading}:"]
                lines += [f"  {test}  {_outcome(tests[test])}" for test in tests]
        lines += self._conformance_lines()
        lines += self._ran_on_lines()
        lines += ["", f"verdict: {'PASS' if self.passed else 'FAIL'}"]
        return "\n".join(line.rstrip() for line in lines)

    def _conformance_lines(self) -> list[str]:
        report = self.conformance.report
        if report is None:
            return ["", f"conformance report: none written ({self.conformance.status})"]
        lines = []
        for section in ("classes", "rules"):
            if report.get(section):
                lines += ["", f"conformance {section} (pristine -> patched):"]
                lines += [
                    f"  {title(name)}: {_side_by_side(value)}"
                    for name, value in report[section].items()
                ]
        return lines

    def _ran_on_lines(self) -> list[str]:
        lines = []
        if machine := self.provenance.get("machine"):
            lines.append(f"ran on: {machine}")
        gate = self.provenance.get("triton gate")
        if gate == "bypassed":
            lines.append(
                "triton gate: bypassed on both trees (vLLM's CPU platform refuses "
                "x86 without triton-cpu; the harness_triton_gate plugin removed "
                "that one check, docs/verdict.md)"
            )
        elif gate:
            lines.append(f"triton gate: {gate}")
        return ["", *lines] if lines else []


def table_line(cells) -> str:
    """A row of a Markdown table (`python -m harness ci`), each cell one cell
    whatever a report holds."""
    return "| " + " | ".join(map(_cell, cells)) + " |"


def _cell(text: str) -> str:
    """A cell that stays one cell of one row: its pipes escaped, its line
    breaks <br>, no HTML tag of its own, no terminal escape
    (harness.log.shown)."""
    from harness.log import shown

    lines = (shown(line).replace("<", "&lt;") for line in text.splitlines())
    return "<br>".join(line.replace("|", "\\|") for line in lines)


def _outcome(outcome: str | tuple[str, str]) -> str:
    return outcome if isinstance(outcome, str) else " -> ".join(outcome)


def _side_by_side(counts: object) -> str:
    if isinstance(counts, dict) and {"pristine", "patched"} <= counts.keys():
        return f"{counts['pristine']} -> {counts['patched']}"
    return str(counts)


# The most of a verdict or an e2e report that is read: far more than any is
# (a full selection's verdict is under a megabyte), far less than /dev/zero.
MOST_BYTES = 64 << 20


def read_small(path) -> bytes:
    """The bytes of a report file (harness.reading.read_bounded): `Refused`
    (a ValueError) when it is not a regular file or is larger than any
    report is."""
    from harness.reading import read_bounded

    return read_bounded(path, MOST_BYTES, what="report")


def strict_json(data: bytes):
    """JSON as `json.dumps` writes it: NaN, Infinity and numbers too large
    for a float are not JSON (ValueError), nor is nesting deeper than the
    parser recurses."""
    import json
    import math

    def no_constant(name: str):
        raise ValueError(f"{name} is not a JSON number")

    def finite(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(f"{text[:40]} is too large for a number")
        return value

    try:
        return json.loads(data, parse_constant=no_constant, parse_float=finite)
    except RecursionError:
        raise ValueError("nested deeper than any verdict") from None


def read_verdict(path) -> Verdict:
    """The verdict `python -m harness test --report` wrote to ``path``; a file
    that cannot be read, or is not such a verdict (a field missing or of the
    wrong kind, anywhere the table or the PR body reads), is UnreadableInput:
    one line naming the file and what is wrong."""
    from harness.errors import UnreadableInput
    from harness.reading import Refused

    def unreadable(reason: str) -> UnreadableInput:
        return UnreadableInput(
            f"{path}: not a verdict of `python -m harness test`: {reason}"
        )

    try:
        data = strict_json(read_small(path))
    except OSError as exc:
        raise UnreadableInput(f"{path}: {exc.strerror or exc}") from None
    except Refused as exc:
        raise UnreadableInput(f"{path}: {exc}") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise unreadable(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise unreadable(f"a JSON {type(data).__name__}, not an object")
    try:
        _check_shape(data)
        verdict = Verdict.from_json(data)
        verdict.row()  # every cell can be made: the outcomes are what they say
    except KeyError as exc:
        raise unreadable(f"no field {exc}") from None
    except (TypeError, AttributeError, ValueError, ArithmeticError) as exc:
        raise unreadable(f"a field of the wrong kind ({exc})") from None
    return verdict


def _check_shape(data: dict) -> None:
    """Every field a verdict's readers use has the kind `as_json` writes."""
    conformance = _kind(data, "conformance", dict)
    _kind(conformance, "status", str, "conformance")
    for name in ("passed", "failed"):
        if name in conformance:
            _count(conformance[name], f"conformance.{name}")
    report = conformance.get("report")
    if report is not None:
        if not isinstance(report, dict):
            raise TypeError("conformance.report is not an object")
        for table in ("classes", "rules"):
            for key, counts in _kind(report, table, dict, "report", {}).items():
                where = f"conformance.report.{table}.{key}"
                if not isinstance(counts, dict):
                    raise TypeError(f"{where} is not an object")
                for side in ("pristine", "patched"):
                    _count(counts.get(side), f"{where}.{side}")
    for name in ("target", "tier", "selection"):
        _kind(data, name, str)
    for side in ("pristine", "patched"):
        outcomes = _kind(_kind(data, side, dict), "outcomes", dict, side)
        for test, outcome in outcomes.items():
            if not isinstance(outcome, str):
                raise TypeError(f"{side}.outcomes[{test!r}] is not a string")
    seconds = data.get("wall_seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise TypeError("wall_seconds is not a number")
    if not 0 <= seconds < 1e12:
        raise ValueError(f"wall_seconds {seconds} is not a duration")
    for key, value in _kind(data, "provenance", dict, "", {}).items():
        if not isinstance(value, str):
            raise TypeError(f"provenance.{key} is not a string")


def _kind(table: dict, name: str, kind: type, where: str = "", default=None):
    """table[name], which must be a ``kind``; KeyError if it is missing and
    has no default."""
    value = table[name] if default is None else table.get(name, default)
    if not isinstance(value, kind):
        shown = f"{where}.{name}" if where else name
        raise TypeError(f"{shown} is a {type(value).__name__}, not a {kind.__name__}")
    return value


def _count(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(f"{where} is {value!r}, not a count")
    return value
