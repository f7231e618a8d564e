"""Fail-before-fix evidence: each patch's tests fail without its fix and pass
with it, as vLLM's pr-checklist asks of a bug fix.

In the export's scratch repository (the pristine tree and one commit per
patch, harness.submission.gitrepo) each patch is checked twice: its test hunks
alone on the commit before it (the pristine tree plus the earlier patches),
then the whole patch. The tests run are the ones the patch adds or changes,
found by comparing each test file's test functions before and after the
patch. The commands are recorded as a reviewer would type them on the pull
request's branch, with pytest's own outcome lines as their output: the
lines of its short test summary (`-rA`), each failure's reason whole (the
run's terminal is wide enough that pytest trims none), and its closing
summary line, whose counts are the only ones a text quotes (where that
line is lost, its FAILED and ERROR lines are counted). Nothing else
pytest prints is read as an outcome: a test's captured log (``ERROR
vllm...``) is no failure.

What the runs need is checked before any work (harness.submission.evidence_env).
A run that still cannot collect its tests for want of a module outside the
tree, or that pytest could not start, ends the export with one line: an
import error is never written as evidence.
"""

import ast
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness import processes
from harness.errors import ExportError, MissingDependency
from harness.log import progress
from harness.submission.evidence_env import in_tree
from harness.submission.gitrepo import BRANCH, git, relative_ref
from harness.trees import triton_gate
from harness.trees.env import SHOWN_ENV, tree_env

# --tb=line: one line per failure, and a collection error's own message (a
# module that cannot be imported), which the runs read and never record.
PYTEST = ("python", "-m", "pytest", "-p", "no:cacheprovider", "-rA", "--tb=line")
# pytest trims a short summary line's reason to the terminal's width; the
# runs' terminal is this wide, so a reason's first line is quoted whole.
COLUMNS = "100000"
# pytest's short test summary lines (-rA): "FAILED tests/x.py::test_y - ...",
# read only in that section (a captured log line may start with "ERROR ").
_SUMMARY_START = re.compile(r"^=+ short test summary info =+$")
_OUTCOME_LINE = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) \S")
_SUMMARY_LINE = re.compile(r"^=+ (?P<summary>.+ in [\d.]+s.*?) =+$")
# The counts of pytest's closing summary line: "1 failed, 2 passed, 1 error".
_COUNT = re.compile(r"(?P<count>\d+) (?P<outcome>[a-z]+)")
_NO_MODULE = re.compile(r"No module named '(?P<module>[\w.]+)'")
# A run of a patch's tests says it is still running this often (seconds).
PROGRESS_S = 30.0


@dataclass(frozen=True)
class PatchTests:
    """The tests (pytest node ids, one per function) a patch adds or changes,
    and those it removes."""

    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    @property
    def node_ids(self) -> tuple[str, ...]:
        return self.changed + self.added


@dataclass(frozen=True)
class TestRun:
    """One pytest run: the commands that lead to it, and what pytest said."""

    __test__ = False  # not a test class, despite its name
    commands: tuple[str, ...]
    lines: tuple[str, ...]  # pytest's outcome lines, then its summary line
    returncode: int
    # The tree's Triton gate (harness.trees.triton_gate): ``bypassed`` where
    # the run lifted vLLM 0.34's, which the command shown does not.
    gate: str = triton_gate.ABSENT

    @property
    def summary(self) -> str:
        """pytest's closing summary line, or '' where it printed none."""
        last = self.lines[-1] if self.lines else ""
        return "" if _OUTCOME_LINE.match(last) else last

    @property
    def counts(self) -> dict[str, int]:
        """pytest's own counts, from its closing summary line: outcome
        (``failed``, ``passed``, ``errors`` as ``error``, ...) -> number."""
        return {
            match["outcome"].removesuffix("s"): int(match["count"])
            for match in _COUNT.finditer(self.summary.rsplit(" in ", 1)[0])
        }

    @property
    def failing(self) -> int:
        """The tests that failed or errored, as pytest counts them: its
        closing line's counts, or where that line was lost (pytest ends a
        run whose test module cannot be imported with a usage error on
        stderr, next to that line), its own FAILED and ERROR lines."""
        if not self.summary:
            return sum(line.startswith(("FAILED ", "ERROR ")) for line in self.lines)
        counts = self.counts
        return counts.get("failed", 0) + counts.get("error", 0)

    @property
    def failed(self) -> bool:
        """Some test failed, or could not be collected (an import error)."""
        return self.returncode != 0 and self.failing > 0

    @property
    def passed(self) -> bool:
        return self.returncode == 0


@dataclass(frozen=True)
class PatchEvidence:
    number: int
    subject: str
    tests: PatchTests
    before: TestRun | None = None  # the test hunks alone
    after: TestRun | None = None  # the whole patch

    @property
    def ok(self) -> bool:
        return bool(
            self.before and self.after and self.before.failed and self.after.passed
        )

    def finding(self) -> str:
        """What the two runs show, in a few words."""
        if not self.tests.node_ids:
            return "adds or changes no test"
        if self.before is None or self.after is None:
            return "not run"
        if not self.before.failed:
            return "its tests do not fail without the fix"
        if not self.after.passed:
            return "its tests do not pass with the fix"
        failing = self.before.failing
        return f"{failing} failing without the fix, all passing with it"


def patch_tests(repo: Path, commit: str) -> PatchTests:
    """The test functions ``commit`` adds, changes or removes under tests/."""
    added, changed, removed = [], [], []
    listing = git(repo, "diff", "--name-only", f"{commit}~1", commit, "--", "tests")
    for path in listing.splitlines():
        name = Path(path).name
        if not (name.startswith("test_") and name.endswith(".py")):
            continue
        before = _test_functions(repo, f"{commit}~1", path)
        after = _test_functions(repo, commit, path)
        for test, source in after.items():
            if test not in before:
                added.append(f"{path}::{test}")
            elif before[test] != source:
                changed.append(f"{path}::{test}")
        removed += [f"{path}::{test}" for test in before if test not in after]
    return PatchTests(tuple(added), tuple(changed), tuple(removed))


def _test_functions(repo: Path, commit: str, path: str) -> dict[str, str]:
    """Test name (``test_x`` or ``TestY::test_x``) -> its code, decorators
    included and positions left out, in the file at that commit."""
    try:
        text = git(repo, "show", f"{commit}:{path}")
    except ExportError:  # not in that commit
        return {}
    try:
        return test_functions(text)
    except SyntaxError as exc:
        raise ExportError(f"{path} at {commit} is not Python: {exc}") from None


def test_functions(text: str) -> dict[str, str]:
    """Test name (``test_x`` or ``TestY::test_x``, as in a pytest node id)
    -> its code, decorators included and positions left out, in the Python
    source ``text``; SyntaxError where it is not Python, or not Python the
    parser can hold (nested past its recursion limit, a NUL byte)."""
    try:
        module = ast.parse(text)
    except (RecursionError, MemoryError) as exc:
        nested = f"too deeply nested to parse ({type(exc).__name__})"
        raise SyntaxError(nested) from None
    except ValueError as exc:  # a NUL byte, on Pythons before 3.11.4
        raise SyntaxError(str(exc)) from None
    found = {}
    for node in module.body:
        if _is_test(node):
            found[node.name] = ast.dump(node)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for item in node.body:
                if _is_test(item):
                    found[f"{node.name}::{item.name}"] = ast.dump(item)
    return found


def _is_test(node: ast.stmt) -> bool:
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    return isinstance(node, functions) and node.name.startswith("test")


def fail_before_fix(
    repo: Path, commits: list[str], subjects: list[str]
) -> list[PatchEvidence]:
    """Run each patch's tests without and with its fix; leave repo at the top."""
    count = len(commits)
    evidence = []
    for number, (commit, subject) in enumerate(zip(commits, subjects, strict=True), 1):
        tests = patch_tests(repo, commit)
        step = f"exporting patch {number} of {count}"
        if not tests.node_ids:
            progress(f"{step}: it adds or changes no test, nothing to run")
            evidence.append(PatchEvidence(number, subject, tests))
            continue
        ref, parent = relative_ref(number, count), f"{BRANCH}~{count - number + 1}"
        git(repo, "checkout", "--quiet", "--detach", commit + "~1")
        hunks = git(repo, "diff", f"{commit}~1", commit, "--", "tests")
        git(repo, "apply", stdin=hunks)
        before = _pytest(
            repo,
            tests.node_ids,
            (
                f"git checkout --quiet --detach {parent}",
                f"git diff {parent} {ref} -- tests | git apply",
            ),
            f"{step}: its {len(tests.node_ids)} test(s) without its fix",
        )
        git(repo, "checkout", "--quiet", "--force", "--detach", commit)
        after = _pytest(
            repo,
            tests.node_ids,
            (f"git checkout --quiet --force --detach {ref}",),
            f"{step}: its {len(tests.node_ids)} test(s) with its fix",
        )
        evidence.append(PatchEvidence(number, subject, tests, before, after))
    git(repo, "checkout", "--quiet", "--force", relative_ref(count, count))
    return evidence


def validation_run(repo: Path, tests: tuple[str, ...], count: int) -> TestRun:
    """The Validation command's tests, run on the branch's last commit."""
    git(repo, "checkout", "--quiet", "--force", relative_ref(count, count))
    return _pytest(
        repo,
        tests,
        (f"git checkout --quiet --force {BRANCH}",),
        f"running the Validation command's {len(tests)} test(s) on the branch",
    )


def _pytest(
    repo: Path, node_ids: tuple[str, ...], checkout: tuple[str, ...], step: str
) -> TestRun:
    """One run of ``node_ids``, ``step`` said on stderr when it starts,
    every PROGRESS_S while it runs, and with pytest's summary when it ends."""
    environment = SHOWN_ENV
    # One test per line: the ids are long, and a shell takes the line breaks.
    shown = " \\\n    ".join(
        (f"{environment} PYTHONPATH=. {' '.join(PYTEST)}", *node_ids)
    )
    # No bytecode: a checkout that rewrites a module within the second its
    # cached bytecode was written, at the same size (a changed digit), would
    # otherwise run the stale module (Python checks mtime and size only).
    # On a tree with vLLM 0.34's Triton gate, the runs here lift it (the body
    # says so); the command shown is the one a reviewer runs.
    gate = triton_gate.state(repo)
    command = [
        sys.executable,
        *PYTEST[1:],
        *triton_gate.pytest_arguments(gate),
        *node_ids,
    ]
    output: list[str] = []
    progress(f"{step}: running pytest ...")
    started = time.monotonic()
    returncode = processes.follow(
        command,
        cwd=repo,
        env=triton_gate.with_plugin(
            # Unbuffered: pytest's stdout and stderr reach the one pipe in
            # the order it writes them, its closing line whole.
            tree_env(
                repo,
                with_harness=False,
                COLUMNS=COLUMNS,
                PYTHONDONTWRITEBYTECODE="1",
                PYTHONUNBUFFERED="1",
            ),
            gate,
        ),
        on_line=output.append,
        every_s=PROGRESS_S,
        tick=lambda: progress(
            f"{step}: pytest still running ({time.monotonic() - started:.0f} s)"
        ),
    )
    # pytest's stdout and stderr together: its outcome and summary lines are
    # the only ones read as such.
    result = subprocess.CompletedProcess(command, returncode, "".join(output), "")
    lines = outcome_lines(result.stdout)
    summaries = [
        match["summary"]
        for line in result.stdout.splitlines()
        if (match := _SUMMARY_LINE.match(line))
    ]
    _refuse_unrunnable(repo, result, lines)
    if summaries:
        lines.append(summaries[-1])
    progress(f"{step}: {summaries[-1] if summaries else f'exit status {returncode}'}")
    return TestRun((*checkout, shown), tuple(lines), result.returncode, gate)


def outcome_lines(output: str) -> list[str]:
    """pytest's short test summary lines (``FAILED tests/x.py::test_y -
    reason``), and nothing else it printed: a captured log line that starts
    with ``ERROR`` is no outcome."""
    lines, inside = [], False
    for line in output.splitlines():
        if _SUMMARY_START.match(line):
            inside = True
        elif inside and _SUMMARY_LINE.match(line):
            break
        elif inside and _OUTCOME_LINE.match(line):
            lines.append(line)
    return lines


def _refuse_unrunnable(repo: Path, result, lines: list[str]) -> None:
    """One line, and no evidence, for a run that could not collect its tests
    for want of a module outside the tree, or that pytest could not start."""
    output = result.stdout + result.stderr
    missing = sorted(
        {
            match["module"]
            for match in _NO_MODULE.finditer(output)
            if not in_tree(repo, match["module"])
        }
    )
    if missing:
        raise MissingDependency(
            f"pytest could not import {', '.join(missing)} for the fail-before-fix "
            f"runs; install it in {sys.executable}'s environment (`python -m "
            "harness deps --target T`), or pass --no-fail-before-fix"
        )
    if not lines:  # no test passed, failed or errored: pytest did not run them
        tail = " / ".join(output.strip().splitlines()[-2:]) or "no output"
        raise ExportError(
            f"pytest exited {result.returncode} without running the tests of the "
            f"fail-before-fix runs: {tail}"
        )
