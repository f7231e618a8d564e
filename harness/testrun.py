"""The `test` verb: upstream tests pristine against patched, then conformance.

The target's upstream selection runs with the tree on PYTHONPATH,
VLLM_TARGET_DEVICE=cpu and HF_HUB_OFFLINE=1 (tests that need a model hub fail
at once on both trees instead of retrying the network for minutes), once on
the pristine tree and once on the patched one;
per-test outcomes come from pytest's JUnit XML (xunit1, which keeps each
test's file, so node ids are rebuilt exactly, parameters included). Pristine
outcomes are cached, keyed by the source, the selection and the Python and
torch versions; `--fresh` runs them again. Then the project's conformance
suite, tests/conformance, runs against both trees.
"""

import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from harness.cli import UserError
from harness.series import TIERS, cached_patched_tree
from harness.sources import cache_dir, pristine_tree, progress, source_identity
from harness.targets import REPO_ROOT, SELECTIONS, Target, get_target
from harness.verdict import FAILING, Conformance, Verdict

CONFORMANCE_SUITE = REPO_ROOT / "tests" / "conformance"
# pytest exit codes that still mean "every selected test ran": all passed,
# some failed.
_COMPLETED = (0, 1)
_WORST_FIRST = ("error", "failed", "skipped", "passed")
_JUNIT_TAGS = (("error", "error"), ("failure", "failed"), ("skipped", "skipped"))


class TestRunError(UserError):
    """A test run that produced no usable outcomes."""

    __test__ = False  # not a test class, despite its name


def read_junit(path: Path) -> dict[str, str]:
    """Node id -> outcome from an xunit1 JUnit XML file written by pytest."""
    outcomes: dict[str, str] = {}
    for case in ElementTree.parse(path).iter("testcase"):
        tags = {child.tag for child in case}
        outcome = next(
            (outcome for tag, outcome in _JUNIT_TAGS if tag in tags), "passed"
        )
        test = _node_id(case)
        earlier = outcomes.get(test, "passed")
        outcomes[test] = min(earlier, outcome, key=_WORST_FIRST.index)
    return outcomes


def _node_id(case: ElementTree.Element) -> str:
    file, classname, name = (case.get(key, "") for key in ("file", "classname", "name"))
    if not classname:  # a collection error, reported against the module
        return file or name
    module = file.removesuffix(".py").replace("/", ".")
    classes = classname.removeprefix(module).strip(".")
    return "::".join([file, *(part for part in classes.split(".") if part), name])


def run_pytest(
    tree: Path, args: list[str], env: dict[str, str], label: str
) -> tuple[int, dict[str, str]]:
    """Run pytest in tree, output streamed; return its exit code and outcomes."""
    with tempfile.TemporaryDirectory() as scratch:
        junit = Path(scratch) / "junit.xml"
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            f"--junitxml={junit}",
            "-o",
            "junit_family=xunit1",
            *args,
        ]
        progress(f"{label}: {' '.join(command[1:])} (in {tree})")
        returncode = subprocess.run(
            command, cwd=tree, env={**os.environ, **env}
        ).returncode
        return returncode, read_junit(junit) if junit.is_file() else {}


# The environment of every upstream run, pristine and patched alike.
UPSTREAM_TEST_ENV = {"VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1"}


def run_upstream(tree: Path, tests: tuple[str, ...], workers: str, label: str):
    returncode, outcomes = run_pytest(
        tree,
        ["-n", workers, "--continue-on-collection-errors", *tests],
        {"PYTHONPATH": str(tree), **UPSTREAM_TEST_ENV},
        f"upstream tests, {label} tree",
    )
    if returncode not in _COMPLETED or not outcomes:
        raise TestRunError(
            f"pytest on the {label} tree exited {returncode} with "
            f"{len(outcomes)} test outcomes; see its output above"
        )
    return outcomes


def pristine_outcomes(
    target: Target, tree: Path, tests: tuple[str, ...], workers: str, fresh: bool
) -> dict[str, str]:
    identity = source_identity(target)
    if identity is None:  # a local tree can change between runs: never cached
        return run_upstream(tree, tests, workers, "pristine")
    key = json.dumps(
        {
            "source": identity,
            "tests": tests,
            "python": platform.python_version(),
            "torch": _installed_version("torch"),
            "env": UPSTREAM_TEST_ENV,
        }
    )
    cached = (
        cache_dir() / "outcomes" / f"{hashlib.sha256(key.encode()).hexdigest()}.json"
    )
    if cached.is_file() and not fresh:
        progress(f"pristine outcomes from the cache ({cached}); --fresh reruns them")
        return json.loads(cached.read_text())
    outcomes = run_upstream(tree, tests, workers, "pristine")
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(outcomes, indent=1, sort_keys=True))
    os.replace(partial, cached)
    return outcomes


def _installed_version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def run_conformance(target: Target, tier: str, pristine: Path, patched: Path):
    if not CONFORMANCE_SUITE.is_dir():
        progress(f"conformance: not present ({CONFORMANCE_SUITE})")
        return Conformance("not present")
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "conformance.json"
        returncode, outcomes = run_pytest(
            REPO_ROOT,
            [str(CONFORMANCE_SUITE)],
            {
                "HARNESS_TARGET": target.name,
                "HARNESS_TIER": tier,
                "HARNESS_PRISTINE_TREE": str(pristine.resolve()),
                "HARNESS_PATCHED_TREE": str(patched.resolve()),
                "HARNESS_CONFORMANCE_REPORT": str(report),
            },
            "conformance suite",
        )
        data = json.loads(report.read_text()) if report.is_file() else None
    values = list(outcomes.values())
    failed = sum(values.count(outcome) for outcome in FAILING)
    if not values:
        status = "no tests"
    elif returncode == 0 and not failed:
        status = "passed"
    else:
        status = "failed"
    return Conformance(status, values.count("passed"), failed, data)


def run_test(args) -> int:
    started = time.monotonic()
    target = get_target(args.target)
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
    )
    report = args.report or (
        cache_dir() / "reports" / f"{target.name}-{args.tier}-{args.selection}.json"
    )
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps(verdict.as_json(), indent=1) + "\n")
    print(verdict.render())
    print(f"verdict written to {report}")
    return 0 if verdict.passed else 1


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "test",
        help="upstream tests pristine against patched, then the conformance suite",
    )
    parser.add_argument("--target", required=True)
    parser.add_argument("--tier", choices=TIERS, default="default")
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
    parser.set_defaults(func=run_test)
