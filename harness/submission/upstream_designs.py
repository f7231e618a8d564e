"""Upstream's design beside the tiers, as benchmarks/upstream_designs.py
measured it (docs/upstream-designs.md): the figures the pull-request body
quotes.

The figures are a file of the checkout, RESULTS, written by the benchmark's
``--json`` and not shipped (benchmarks/results/ is ignored by git: figures
measured at an earlier revision would be another series' and the export
would leave them out); the body quotes them only for the target they were
measured on,
only where they measured the tree exported (the tier's whole series, at a
revision with this checkout's series: harness.submission.mail checks it), and
only the rows of the release, the exported tier and upstream's design, each
with its totals beside its bytes per event. Without the file the texts
leave the comparison out. Nothing here measures: run the benchmark (its
commands are in the doc) in the checkout that exports.
"""

import json
from pathlib import Path

from harness import checkout
from harness.submission import pr_prose

RESULTS = Path("benchmarks") / "results" / "upstream-designs.json"
# What the figures depend on besides the series, in the checkout: the
# benchmark, upstream's design as a patch, and the code that replays, checks
# and routes the streams. Changed since the revision measured, the figures
# are another measurement's.
INPUTS = (
    "benchmarks/upstream_designs.py",
    "patches/alternatives",
    "harness/contract",
    "harness/routers",
    "harness/suites",
    "harness/workloads",
    "harness/engine",
)
BASELINE, UPSTREAM = "pristine", "upstream"
CONSUMERS = ("ignoring", "reading")


def load(target: str, root: Path | None = None) -> dict | None:
    """The measured figures for ``target``, or None where there are none."""
    path = (root or checkout.root()) / RESULTS
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict) or found.get("target") != target:
        return None
    trees = found.get("trees")
    if not isinstance(trees, dict) or not {BASELINE, UPSTREAM} <= trees.keys():
        return None
    return found


def _consumer(tree: dict, name: str) -> dict:
    return tree.get("consumers", {}).get(name, {})


def _pair(tree: dict, key: str, field: str) -> str:
    return " / ".join(
        str(_consumer(tree, name).get(key, {}).get(field, "-")) for name in CONSUMERS
    )


def _exact(tree: dict) -> str:
    cells = []
    for name in CONSUMERS:
        router = _consumer(tree, name).get("router", {})
        probes = router.get("probes") or 0
        cells.append(f"{100 * router.get('exact', 0) / probes:.1f}" if probes else "-")
    return " / ".join(cells)


def _tests(tree: dict, elsewhere: str) -> str:
    tests = tree.get("tests")
    if not isinstance(tests, dict):
        return elsewhere
    failed = tests.get("failed", 0) + tests.get("error", 0)
    return f"{tests.get('passed', 0)} passed, {failed} failed"


def rows(results: dict, tier: str, mine: str) -> list[tuple[str, dict]]:
    """(label, figures) of the release, the tier (labelled ``mine``) and
    upstream's design."""
    trees = results["trees"]
    found = [(results.get("release", BASELINE), trees[BASELINE])]
    if tier in trees:
        found.append((mine, trees[tier]))
    found.append(("#44488 + #58121", trees[UPSTREAM]))
    return found


def table(
    results: dict,
    tier: str = "",
    mine: str = "this PR",
    elsewhere: str = "in the run above",
) -> list[str]:
    """The comparison as markdown: each cell pair is a consumer that ignores
    the new fields / one that reads them; ``elsewhere`` stands for the tests
    of a tree the benchmark did not run them in."""
    workloads = results.get("workloads", {})
    lines = [
        "| stream | events | bytes | bytes per event | release events not kept "
        "byte for byte | stores whose parent is not live | router predictions "
        "exact % | over-predicted | under-predicted | vLLM's tests |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    release = results["trees"][BASELINE]
    for label, tree in rows(results, tier, mine):
        events = tree.get("events", 0)
        per_event = f"{tree.get('bytes', 0) / events:.0f}" if events else "-"
        totals = " | ".join(
            _total(tree, release, key, tree is not release)
            for key in ("events", "bytes")
        )
        lines.append(
            f"| {label} | {totals} | {per_event} | "
            f"{tree.get('pristine_events_changed', '-')} | "
            f"{_pair(tree, 'rules', 'C1')} | {_exact(tree)} | "
            f"{_pair(tree, 'router', 'over')} | {_pair(tree, 'router', 'under')} | "
            f"{_tests(tree, elsewhere)} |"
        )
    lines += [
        "",
        "Cells with two figures: a consumer that ignores the `skipped_*` fields "
        "/ one that reads them. Measured "
        f"{results.get('measured', '')} on "
        f"{len(workloads.get('configs', []))} workload configs x "
        f"{workloads.get('seeds', '?')} seeds x {workloads.get('ops', '?')} "
        f"operations, {workloads.get('probes', '?')} probe requests per quiet "
        f"point (`benchmarks/upstream_designs.py`, at {results.get('revision')}).",
    ]
    return lines


def _total(tree: dict, release: dict, key: str, against: bool) -> str:
    """A tree's total ``key``, with its change from the release's."""
    value, base = tree.get(key, 0), release.get(key, 0)
    if not against or not base:
        return str(value)
    return f"{value} ({100 * (value - base) / base:+.1f} %)"


def still_wanted(results: dict, fixes: frozenset[str]) -> list[str]:
    """What a consumer that reads the new fields still finds with
    upstream's design, of what the export fixes."""
    classes = _consumer(results["trees"][UPSTREAM], "reading").get("classes", {})
    return [
        f"{classes[cls]} × {pr_prose.plain(cls)}"
        for cls in sorted(fixes)
        if isinstance(classes.get(cls), int) and classes[cls] > 0
    ]
