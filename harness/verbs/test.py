"""`test`: upstream tests pristine against patched, then the conformance suite."""

import json
import time
from pathlib import Path

from harness.targets import SELECTIONS
from harness.verbs import COST, add_target_arguments


def register(parser) -> None:
    parser.description += (
        ". Needs the harness's verdict extra (pytest, pytest-xdist) and the "
        "target's test requirements (`python -m harness deps`), checked before "
        "any work. pytest's output goes to log files the verdict names (-v "
        "shows it too); a progress line every few seconds counts the tests "
        f"passed and failed so far. Costs, {COST}, as its load allows: the ci "
        "selection 2-3 min per tier once the target's pristine outcomes are "
        "cached; main's first run from a cold cache (the sdist fetched, the "
        "pristine tests run too) 7-16 min; the full selection 7-18 min; "
        "0.35 GB of harness cache per target (sdist, trees, outcomes, logs), "
        "and 2.6 GB for an environment with vLLM's requirements."
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
        "-v",
        "--verbose",
        action="store_true",
        help="show pytest's output as it runs (on stderr), besides its log file",
    )
    parser.add_argument(
        "--report",
        type=Path,
        help="where to write the verdict as JSON (default: "
        "reports/TARGET-TIER-SELECTION.json in this checkout's folder of the "
        "cache, checkouts/CHECKOUT/)",
    )
    parser.set_defaults(run=run)


def run(args) -> int:
    from harness import cache
    from harness.log import progress
    from harness.series.apply import cached_patched_tree
    from harness.series.judged import tree_key
    from harness.suites.conformance import run_conformance
    from harness.suites.provenance import provenance
    from harness.suites.upstream import pristine_outcomes, run_upstream
    from harness.targets import get_target
    from harness.trees import triton_gate
    from harness.trees.preflight import extra, require, vllm_requirements
    from harness.trees.sources import pristine_tree
    from harness.verdict import Verdict

    started = time.monotonic()
    target = get_target(args.target)
    require(
        extra("verdict"),
        vllm_requirements(target.name),
        toxenv=target.toxenv(args.tier),
    )
    cache.claim_checkout_dir()
    report = args.report or cache.report(target.name, args.tier, args.selection)
    check_report_path(report)
    judged_on = tree_key(target, args.tier)  # the series and code as they start
    tests = target.selection(args.selection)
    logs = {
        "pristine": cache.log(f"{target.name}-{args.selection}-pristine"),
        "patched": cache.log(f"{target.name}-{args.tier}-{args.selection}-patched"),
        "conformance": cache.log(f"{target.name}-{args.tier}-conformance"),
    }
    pristine = pristine_tree(target)
    patched = cached_patched_tree(target, args.tier)
    before = pristine_outcomes(
        target,
        pristine,
        tests,
        args.workers,
        args.fresh,
        logs["pristine"],
        args.verbose,
    )
    after = run_upstream(
        patched, tests, args.workers, "patched", logs["patched"], args.verbose
    )
    conformance = run_conformance(
        target, args.tier, pristine, patched, logs["conformance"], args.verbose
    )
    verdict = Verdict(
        target=target.name,
        tier=args.tier,
        selection=args.selection,
        pristine=before,
        patched=after,
        conformance=conformance,
        wall_seconds=time.monotonic() - started,
        provenance={
            **provenance(),
            **judged_on,
            "triton gate": triton_gate.state(pristine),
        },
    )
    written = [str(log) for log in logs.values() if log.is_file()]
    print(f"pytest's output: {', '.join(written)}")
    print(verdict.render(), flush=True)
    write_report(report, json.dumps(verdict.as_json(), indent=1) + "\n")
    progress(f"verdict written to {report}")
    return 0 if verdict.passed else 1


def check_report_path(report: Path) -> None:
    """Refuse, before any work, a --report that can never be written."""
    from harness import cache, scratch
    from harness.errors import OutputError

    cache.outside_trees(report, "--report")
    if report.is_dir():
        raise OutputError(f"--report {report} is a directory; give a file name")
    if (blocking := scratch.blocking_file(report)) is not None:
        raise OutputError(f"--report {report}: {blocking} is not a directory")


def write_report(report: Path, text: str) -> None:
    """Write the verdict JSON whole or not at all (after it is printed)."""
    from harness import scratch
    from harness.errors import OutputError

    try:
        with (
            scratch.folders(report.parent),
            scratch.replacing(report, "report") as sink,
        ):
            sink.write(text.encode())
    except OSError as exc:
        raise OutputError(
            f"cannot write the verdict to {report}: {exc.strerror or exc}; the "
            f"verdict printed above stands"
        ) from None
