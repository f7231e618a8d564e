"""Upstream tests in a vLLM tree, and their per-test outcomes.

The target's upstream selection runs in the tree's environment
(harness.trees.env: the tree on PYTHONPATH, the CPU platform, no model hub),
once on the pristine tree and once on the patched one; per-test outcomes
come from pytest's JUnit XML (xunit1, which keeps each test's file, so node
ids are rebuilt exactly, parameters included). Pristine outcomes are cached,
keyed by the source, the selection, the environment and the Python and torch
versions; ``fresh`` runs them again.

pytest's own output goes to a log file (``log``; echoed to stderr too with
``echo``), and every few seconds a progress line counts the tests passed and
failed so far (read from pytest's ``-v`` lines), so that a run of minutes is
never silent and the verdict is not buried under pytest's output.
"""

import hashlib
import importlib.metadata
import json
import os
import platform
import re
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

from harness import cache, processes
from harness.errors import TestRunError, require
from harness.log import progress, warning
from harness.reading import Refused, read_bounded
from harness.targets import Target
from harness.trees import triton_gate
from harness.trees.env import HUB_MODELS, UPSTREAM_ENV, tree_env

# pytest exit codes that still mean "every selected test ran": all passed,
# some failed.
_COMPLETED = (0, 1)
_WORST_FIRST = ("error", "failed", "skipped", "passed")
_JUNIT_TAGS = (("error", "error"), ("failure", "failed"), ("skipped", "skipped"))
PROGRESS_EVERY_S = 5.0
# pytest -v's words for a test's outcome, as the verdict counts them (the
# JUnit file it reads: an xfail is skipped, an error failed).
_OUTCOME_WORDS = {
    "PASSED": "passed",
    "XPASS": "passed",
    "FAILED": "failed",
    "ERROR": "failed",
    "SKIPPED": "skipped",
    "XFAIL": "skipped",
}
_WORD = "|".join(_OUTCOME_WORDS)
_COUNTED = ("passed", "failed", "skipped")
# pytest -v's line for a test's outcome: "[gw0] [ 10%] PASSED NODE" with xdist,
# "NODE PASSED [ 10%]" or "NODE SKIPPED (reason) [ 10%]" without, where NODE's
# parameters may hold spaces ("test_x[partial x128, events off]"); its summary
# lines ("FAILED NODE - ...") are not.
_OUTCOME_LINE = re.compile(
    rf"^\[gw\d+\] \[\s*\d+%\] ({_WORD}) (.+)$|^(\S.*?) ({_WORD})\b.* \[\s*\d+%\]$"
)


class Tally:
    """Outcomes counted from pytest -v's lines as they come: a test's worst
    (a pass then an error at teardown is one failed test), in the verdict's
    words, so that the last progress line and the verdict's row agree."""

    def __init__(self):
        self.outcomes: dict[str, str] = {}

    def see(self, line: str) -> None:
        if match := _OUTCOME_LINE.match(line.rstrip("\n")):
            word, node = (match[1], match[2]) if match[1] else (match[4], match[3])
            found = _OUTCOME_WORDS[word]
            earlier = self.outcomes.get(node.strip(), found)
            self.outcomes[node.strip()] = min(earlier, found, key=_WORST_FIRST.index)

    def __str__(self) -> str:
        counts = Counter(self.outcomes.values())
        found = [
            f"{counts[w]} {w}" for w in ("passed", "failed", "skipped") if counts[w]
        ]
        return ", ".join(found) or "no test done"


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
    tree: Path,
    args: list[str],
    env: dict[str, str],
    label: str,
    log: Path | None = None,
    echo: bool = False,
) -> tuple[int, dict[str, str]]:
    """Run pytest in tree with env, its output to ``log`` (a scratch file if
    None) and progress lines on stderr; return its exit code and outcomes."""
    require("pytest", "verdict")
    require("xdist", "verdict")
    with tempfile.TemporaryDirectory() as scratch:
        junit = Path(scratch) / "junit.xml"
        log = log or Path(scratch) / "pytest.log"
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-v",
            f"--junitxml={junit}",
            "-o",
            "junit_family=xunit1",
            *args,
        ]
        progress(f"{label}: {' '.join(command[1:])} (in {tree}); output in {log}")
        tally, started = Tally(), time.monotonic()

        def elapsed() -> str:
            return f"{time.monotonic() - started:.0f} s"

        try:
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("w", encoding="utf-8") as sink:

                def on_line(line: str) -> None:
                    sink.write(line)
                    tally.see(line)
                    if echo:
                        sys.stderr.write(line)

                returncode = processes.follow(
                    command,
                    cwd=tree,
                    env=env,
                    on_line=on_line,
                    every_s=PROGRESS_EVERY_S,
                    tick=lambda: progress(f"{label}: {tally} so far ({elapsed()})"),
                )
        except OSError as exc:
            raise cache.unusable(exc) from None
        progress(f"{label}: {tally} in {elapsed()}")
        return returncode, read_junit(junit) if junit.is_file() else {}


def runnable_in(tree: Path, tests: tuple[str, ...]) -> list[str]:
    """The selection as ``tree`` can run it. A node id naming one test
    (``FILE::NAME``, parameters or a class allowed) is left out where FILE does
    not define NAME: a test the series adds is absent from the pristine tree,
    and pytest runs nothing at all when a node id names a test it cannot find.
    Files are passed as given (a missing file is pytest's error to report).
    A test file is read as a fork's file is (harness.reading): one that is
    not a regular file (a FIFO, a link to /dev/zero) or is larger than any
    test file is cannot be read, and its single tests are left out, with a
    warning."""
    from harness.submission.evidence import test_functions

    # Each file read and parsed once: None where pytest is left to report it.
    defined_in: dict[str, set[str] | None] = {}

    def defined(path: str) -> set[str] | None:
        if path not in defined_in:
            try:
                text = read_bounded(tree / path, TEST_FILE_MAX_BYTES, what="test file")
                defined_in[path] = set(test_functions(text.decode("utf-8", "replace")))
            except FileNotFoundError:
                defined_in[path] = set()
            except (OSError, Refused) as exc:
                warning(
                    f"{tree / path}: cannot be read ({_why(exc)}); its single "
                    f"tests are left out"
                )
                defined_in[path] = set()
            except SyntaxError:  # pytest reports the file as it is
                defined_in[path] = None
        return defined_in[path]

    runnable = []
    for test in tests:
        path, _, name = test.partition("::")
        names = defined(path) if name else None
        if names is None or name.split("[", 1)[0] in names:
            runnable.append(test)
    return runnable


# The most of a test file that is read: vLLM's largest is well under 1 MiB.
TEST_FILE_MAX_BYTES = 16 << 20


def _why(exc: Exception) -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)


def for_tier(target: Target, tier: str, tests: tuple[str, ...]) -> list[str]:
    """The selection as the tier's patched tree holds it, read from the
    patches alone: a single test (``FILE::NAME``) that another tier's patches
    add and this tier's do not is left out. An unknown tier is a TargetError."""
    from harness.series.model import load_series

    target.series_file(tier)  # names the tiers the target has
    added = {name: _tests_added(load_series(target, name)) for name in target.series}
    elsewhere = set().union(*(found for name, found in added.items() if name != tier))
    others_only = elsewhere - added[tier]
    return [test for test in tests if _single_test(test) not in others_only]


def _single_test(test: str) -> tuple[str, str] | None:
    """(FILE, function name) of a node id naming one test, None for a file."""
    path, _, name = test.partition("::")
    return (path, name.split("[", 1)[0].rsplit("::", 1)[-1]) if name else None


_DEF_LINE = re.compile(r"^([+-])\s*(?:async\s+)?def\s+(test\w*)\s*\(", re.MULTILINE)


def _tests_added(series) -> set[tuple[str, str]]:
    """(FILE, function name) of every test function the series' patches add:
    a ``def`` line a patch adds to a file and does not remove from it."""
    added: set[tuple[str, str]] = set()
    for entry in series.entries:
        text = series.patch_path(entry).read_text(encoding="utf-8", errors="replace")
        for section in re.split(r"^\+\+\+ ", text, flags=re.MULTILINE)[1:]:
            header, _, hunks = section.partition("\n")
            name = header.split("\t", 1)[0].strip()
            path = "/".join(name.split("/")[entry.strip :])
            defs = {"+": set(), "-": set()}
            for match in _DEF_LINE.finditer(hunks):
                defs[match[1]].add(match[2])
            added |= {(path, test) for test in defs["+"] - defs["-"]}
    return added


def run_upstream(
    tree: Path,
    tests: tuple[str, ...],
    workers: str,
    label: str,
    log: Path | None = None,
    echo: bool = False,
):
    gate = triton_gate.state(tree)
    returncode, outcomes = run_pytest(
        tree,
        [
            *triton_gate.pytest_arguments(gate),
            "-n",
            workers,
            "--continue-on-collection-errors",
            *runnable_in(tree, tests),
        ],
        triton_gate.with_plugin(tree_env(tree, with_harness=False), gate),
        f"upstream tests, {label} tree",
        log,
        echo,
    )
    if returncode not in _COMPLETED or not outcomes:
        where = f"see its output in {log}" if log else "run it with -v to see why"
        raise TestRunError(
            f"pytest on the {label} tree exited {returncode} with "
            f"{len(outcomes)} test outcomes; {where}"
        )
    return outcomes


def pristine_outcomes(
    target: Target,
    tree: Path,
    tests: tuple[str, ...],
    workers: str,
    fresh: bool,
    log: Path | None = None,
    echo: bool = False,
) -> dict[str, str]:
    identity = target.source.identity()
    if identity is None:  # a local tree can change between runs: never cached
        return run_upstream(tree, tests, workers, "pristine", log, echo)
    gate = triton_gate.state(tree)
    key = json.dumps(
        {
            "source": identity,
            "tests": tests,
            "python": platform.python_version(),
            "torch": _installed_version("torch"),
            "env": UPSTREAM_ENV,
            "hub": HUB_MODELS,
            # Only where it is bypassed: outcomes cached before it stay valid.
            **({"triton_gate": gate} if gate == triton_gate.BYPASSED else {}),
        }
    )
    cached = cache.outcomes(hashlib.sha256(key.encode()).hexdigest())
    if cached.is_file() and not fresh:
        progress(f"pristine outcomes from the cache ({cached}); --fresh reruns them")
        return json.loads(cached.read_text())
    outcomes = run_upstream(tree, tests, workers, "pristine", log, echo)
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
