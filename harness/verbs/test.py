"""`test`: upstream tests pristine against patched, then the conformance suite."""

import json
import time
from pathlib import Path

from harness.targets import SELECTIONS
from harness.verbs import add_target_arguments


def register(parser) -> None:
    parser.description += (
        ". Needs the harness's verdict extra (pytest, pytest-xdist) "
        "and the target's test requirements (`python -m harness deps`)."
    )
    add_target_arguments(parser)
    parser.add_argument(
        "--selection",
        choices=SELECTIONS,
        default="ci",
        help="ci: the target's upstream_tests; full: its upstream_tests_full",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="rerun the pristine tests, ignore the cache",
    )
    parser.add_argument(
        "-n",
        dest="workers",
        default="auto",
        help="pytest-xdist workers for the upstream tests (default: auto)",
    )
    parser.add_argument(
        "--report",
        type=Path,
        help="where to write the verdict as JSON (default: "
        "reports/TARGET-TIER-SELECTION.json in the cache directory)",
    )
    parser.set_defaults(run=run)


def run(args) -> int:
    from harness import cache
    from harness.runs.conformance import run_conformance
    from harness.runs.provenance import provenance
    from harness.runs.upstream import pristine_outcomes, run_upstream
    from harness.series.apply import cached_patched_tree
    from harness.targets import get_target
    from harness.trees.sources import pristine_tree
    from harness.verdict import Verdict

    started = time.monotonic()
    target = get_target(args.target)
    report = args.report or cache.report(target.name, args.tier, args.selection)
    check_report_path(report)
    tests = target.selection(args.selection)
    pristine = pristine_tree(target)
    patched = cached_patched_tree(target, args.tier)
    before = pristine_outcomes(target, pristine, tests, args.workers, args.fresh)
    after = run_upstream(patched, tests, args.workers, "patched")
    conformance = run_conformance(target, args.tier, pristine, patched)
    verdict = Verdict(
        target=target.name,
        tier=args.tier,
        selection=args.selection,
        pristine=before,
        patched=after,
        conformance=conformance,
        wall_seconds=time.monotonic() - started,
        provenance=provenance(),
    )
    print(verdict.render(), flush=True)
    write_report(report, json.dumps(verdict.as_json(), indent=1) + "\n")
    print(f"verdict written to {report}")
    return 0 if verdict.passed else 1


def check_report_path(report: Path) -> None:
    """Refuse, before any work, a --report that can never be written."""
    from harness import scratch
    from harness.errors import OutputError

    if report.is_dir():
        raise OutputError(f"--report {report} is a directory; give a file name")
    if (blocking := scratch.blocking_file(report)) is not None:
        raise OutputError(f"--report {report}: {blocking} is not a directory")


def write_report(report: Path, text: str) -> None:
    """Write the verdict JSON whole or not at all (after it is printed)."""
    from harness import scratch
    from harness.errors import OutputError

    try:
        report.parent.mkdir(parents=True, exist_ok=True)
        with scratch.replacing(report, "report") as sink:
            sink.write(text.encode())
    except OSError as exc:
        raise OutputError(
            f"cannot write the verdict to {report}: {exc.strerror or exc}; the "
            f"verdict printed above stands"
        ) from None
