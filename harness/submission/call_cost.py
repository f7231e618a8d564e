"""What the exported branch costs the scheduler-thread calls it changes,
against the pristine tree, measured at export.

The measurement is deterministic: the Python lines each call executes, the
events it queues and their bytes on the wire. It runs in one child process
per tree; the export verb passes in the function that does it
(`harness.workloads.call_count.measure`), which this module calls and whose
figures it words for the pull-request body. Time is not quoted: it depends
on the machine, and `benchmarks/partial_entry_cost.py` times the same calls
side by side.
"""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ExportError, UserError
from harness.log import progress

# (tree, out) -> {case: {"title", "lines", "events", "bytes"} or None}
Measure = Callable[[Path, Path], dict]


@dataclass(frozen=True)
class Call:
    """One measured call: each figure counted twice per tree, as [a, b]."""

    title: str
    pristine: dict[str, list[int] | None]
    patched: dict[str, list[int] | None]


@dataclass(frozen=True)
class CallCost:
    release: str
    calls: tuple[Call, ...]


def measure(
    measure_tree: Measure, pristine: Path, branch: Path, scratch: Path, release: str
) -> CallCost:
    """The calls on both trees; a call either tree lacks is left out."""
    progress(f"measuring the calls the series changes, on {release} and the branch")
    figures = {}
    for name, tree in (("pristine", pristine), ("patched", branch)):
        try:
            figures[name] = measure_tree(tree, scratch / f"calls-{name}.json")
        except UserError as exc:
            raise ExportError(f"cannot measure the calls' cost: {exc}") from None
    calls = tuple(
        Call(before["title"], before, figures["patched"][case])
        for case, before in figures["pristine"].items()
        if before is not None and figures["patched"].get(case) is not None
    )
    return CallCost(release, calls)


def _cell(before: list[int] | None, after: list[int] | None, ratio: bool) -> str:
    def shown(counts: list[int]) -> str:
        return " / ".join(f"{n:,}" for n in dict.fromkeys(counts))

    if before is None or after is None:  # not counted
        return "-"

    cell = f"{shown(before)} → {shown(after)}"
    if ratio and before[0]:
        cell += f" ({after[0] / before[0]:.2f}x)"
    return cell


def paragraph(cost: CallCost | None) -> str:
    """The measured cost, for the body; empty where nothing was measured."""
    if cost is None or not cost.calls:
        return ""
    lines = [
        f"**Cost on the scheduler thread**, measured at export on "
        f"{cost.release} as released → this branch, each call in fresh pools "
        "with a submitter's harness (not part of this PR): the Python lines "
        "it executes (`sys.settrace`), the events it queues and their bytes "
        "as one `KVEventBatch` (a step's, for the seeded steps, whose lines "
        "are not counted: the harness's own would dilute them). These are "
        "counts, the same on every run (a cell shows two where two runs "
        "differ); time depends on the machine and is not quoted.",
        "",
        "| call | lines | events | bytes |",
        "| --- | ---: | ---: | ---: |",
    ]
    for call in cost.calls:
        before, after = call.pristine, call.patched
        cells = [
            call.title,
            _cell(before["lines"], after["lines"], True),
            _cell(before["events"], after["events"], False),
            _cell(before["bytes"], after["bytes"], True),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
