"""What the exported change costs the scheduler-thread calls it changes,
against the pristine tree (and, for a comment, the upstream design's tree
beside it), measured at export.

The calls are those of the functions the change alters
(harness.submission.commits.changed_functions); the cases that call them,
at the block / hash-block ratios users run, events on and off, and how a
case is counted in one tree are the workloads layer's, which the export
verb passes in (`Measurer`: harness.workloads.call_cases and call_count).
The measurement is deterministic: the Python lines each call executes, the
events it queues or publishes and their bytes on the wire, in one child
process per tree. Time is not quoted: it depends on the machine, and
`benchmarks/partial_entry_cost.py` times the same cases in interleaved
rounds (`timing_command`).
"""

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ExportError, UserError
from harness.log import progress


@dataclass(frozen=True)
class Measurer:
    """What measures a change's calls: ``cases_for(changed functions)`` ->
    (cases, functions no case calls); ``measure(tree, cases, out)`` ->
    {case: {"title", "lines", "events", "bytes"} or None}."""

    cases_for: Callable[[list[str]], tuple[tuple[str, ...], tuple[str, ...]]]
    measure: Callable[[Path, tuple[str, ...], Path], dict]


@dataclass(frozen=True)
class Call:
    """One measured case: each tree's figures, each counted twice, as [a, b]."""

    case: str
    title: str
    figures: tuple[dict[str, list[int] | None], ...]  # per tree, in order
    note: str | None = None  # said once for every call of its kind


@dataclass(frozen=True)
class CallCost:
    release: str
    trees: tuple[str, ...]  # what each column is: the release first
    changed: tuple[str, ...]  # the functions the change alters
    unmeasured: tuple[str, ...]  # those no case calls
    calls: tuple[Call, ...]


def measure(
    measurer: Measurer,
    changed: list[str],
    trees: dict[str, Path],
    scratch: Path,
    release: str,
) -> CallCost:
    """The cases of the ``changed`` functions on every tree (the release
    first); a case some tree lacks is left out."""
    cases, unmeasured = measurer.cases_for(changed)
    figures = []
    if cases:
        progress(f"measuring the calls the change alters, on {', '.join(trees)}")
    for number, tree in enumerate(trees.values() if cases else ()):
        try:
            figures.append(measurer.measure(tree, cases, scratch / f"calls-{number}"))
        except UserError as exc:
            raise ExportError(f"cannot measure the calls' cost: {exc}") from None
    calls = tuple(
        Call(
            case,
            figures[0][case]["title"],
            tuple(tree[case] for tree in figures),
            figures[0][case].get("note"),
        )
        for case in cases
        if figures and all(tree.get(case) is not None for tree in figures)
    )
    return CallCost(release, tuple(trees), tuple(changed), unmeasured, calls)


def _cell(counts: list[list[int] | None], ratio: bool) -> str:
    def shown(found: list[int]) -> str:
        return " / ".join(f"{n:,}" for n in dict.fromkeys(found))

    if any(found is None for found in counts):  # not counted
        return "-"
    first = counts[0][0]
    cells = [shown(counts[0])]
    for found in counts[1:]:
        cell = shown(found)
        if ratio and first:
            cell += f" ({found[0] / first:.2f}x)"
        cells.append(cell)
    return " → ".join(cells)


def _function(name: str) -> str:
    return f"`{name.split('::', 1)[-1]}`"


def _placeholders(cost: CallCost) -> list[str]:
    """A directory placeholder per tree: the release's, the change's last,
    a design's between."""
    middle = (
        ["DESIGN"]
        if len(cost.trees) == 3
        else [f"TREE{n}" for n in range(1, len(cost.trees) - 1)]
    )
    return ["RELEASED", *middle, "CHANGE"]


def timing_command(cost: CallCost) -> str:
    """The benchmark that times the same cases, a tree per placeholder."""
    trees = " ".join(f"--tree {place.lower()}={place}" for place in _placeholders(cost))
    cases = " ".join(f"--case {shlex.quote(call.case)}" for call in cost.calls)
    return f"python benchmarks/partial_entry_cost.py {trees} {cases}"


def paragraph(cost: CallCost | None) -> str:
    """The measured cost, for a body or a comment; empty where nothing
    was measured."""
    if cost is None or not cost.changed:
        return ""
    changed = ", ".join(map(_function, cost.changed))
    if not cost.calls:
        return (
            f"**Cost on the scheduler thread.** The change alters {changed}; "
            "no case of the submitter's harness measures "
            + ("them" if len(cost.changed) > 1 else "it")
            + ", and no cost is quoted."
        )
    trees = " → ".join(cost.trees)
    lines = [
        f"**Cost on the scheduler thread** of the calls the change alters "
        f"({changed}), measured at export ({trees}), each call in a fresh "
        "set-up made by a submitter's harness (not part of this change): the "
        "Python lines it executes (`sys.settrace`, what it calls included), "
        "the events it queues (published, for the scheduler's calls) and "
        "their bytes as one `KVEventBatch`. These are counts, the same on "
        "every run (a cell shows two where two runs differ).",
        "",
        "| call | lines | events | bytes |",
        "| --- | ---: | ---: | ---: |",
    ]
    for call in cost.calls:
        cells = [
            call.title,
            _cell([tree["lines"] for tree in call.figures], True),
            _cell([tree["events"] for tree in call.figures], False),
            _cell([tree["bytes"] for tree in call.figures], True),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    notes = dict.fromkeys(call.note for call in cost.calls if call.note)
    lines += [f"\n{note}." for note in notes]
    lines += [
        "",
        "Time depends on the machine and is not measured at export: "
        f"`{timing_command(cost)}` times the same calls in interleaved rounds ("
        + ", ".join(
            f"{place}: {name}"
            for place, name in zip(_placeholders(cost), cost.trees, strict=True)
        )
        + ").",
    ]
    lines += growth(cost)
    if cost.unmeasured:
        lines.append(
            "Also changed, and called directly by no case above: "
            + ", ".join(map(_function, cost.unmeasured))
            + "."
        )
    return "\n".join(lines)


def growth(cost: CallCost) -> list[str]:
    """How a partial entry's registration grows with block / hash block, in
    lines and bytes, on each tree, where the ``partial xR`` cases measured
    it."""
    partial = [
        call
        for call in cost.calls
        if call.case.startswith("partial x") and not call.case.endswith("events off")
    ]
    if len(partial) < 2:
        return []
    ratios = ", ".join(call.case.removeprefix("partial x") for call in partial)

    def per_tree(figure: str) -> str:
        return "; ".join(
            f"{name} "
            + ", ".join(f"{call.figures[number][figure][0]:,}" for call in partial)
            for number, name in enumerate(cost.trees)
        )

    return [
        "",
        f"Per `cache_partial_block()` call, with events on, at block / hash "
        f"block {ratios}: Python lines {per_tree('lines')}; bytes "
        f"{per_tree('bytes')}.",
    ]
