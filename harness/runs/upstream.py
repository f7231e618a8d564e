"""Upstream tests in a vLLM tree, and their per-test outcomes.

The target's upstream selection runs in the tree's environment
(harness.trees.env: the tree on PYTHONPATH, the CPU platform, no model hub),
once on the pristine tree and once on the patched one; per-test outcomes
come from pytest's JUnit XML (xunit1, which keeps each test's file, so node
ids are rebuilt exactly, parameters included). Pristine outcomes are cached,
keyed by the source, the selection, the environment and the Python and torch
versions; ``fresh`` runs them again.
"""

import hashlib
import importlib.metadata
import json
import os
import platform
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from harness import cache, processes
from harness.errors import TestRunError, require
from harness.log import progress
from harness.targets import Target
from harness.trees.env import UPSTREAM_ENV, tree_env

# pytest exit codes that still mean "every selected test ran": all passed,
# some failed.
_COMPLETED = (0, 1)
_WORST_FIRST = ("error", "failed", "skipped", "passed")
_JUNIT_TAGS = (("error", "error"), ("failure", "failed"), ("skipped", "skipped"))


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
    """Run pytest in tree with env, output streamed; return its exit code and
    outcomes."""
    require("pytest", "verdict")
    require("xdist", "verdict")
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
        returncode = processes.call(command, cwd=tree, env=env)
        return returncode, read_junit(junit) if junit.is_file() else {}


def run_upstream(tree: Path, tests: tuple[str, ...], workers: str, label: str):
    returncode, outcomes = run_pytest(
        tree,
        ["-n", workers, "--continue-on-collection-errors", *tests],
        tree_env(tree, with_harness=False),
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
    identity = target.source.identity()
    if identity is None:  # a local tree can change between runs: never cached
        return run_upstream(tree, tests, workers, "pristine")
    key = json.dumps(
        {
            "source": identity,
            "tests": tests,
            "python": platform.python_version(),
            "torch": _installed_version("torch"),
            "env": UPSTREAM_ENV,
        }
    )
    cached = cache.outcomes(hashlib.sha256(key.encode()).hexdigest())
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
