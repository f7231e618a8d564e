"""What an export knows about the series it submits: the facts the cover
letter and the pull-request body are written from, gathered once.

The facts about the series come from it as committed in the export's scratch
repository (subjects, messages, the tests each patch adds or changes) and
from the fail-before-fix runs; the facts about its testing from the newest
verdict `python -m harness test` wrote for the same target and tier in this
checkout (checked before any work: harness.verdict.read_verdict, same target
and tier), quoted only when it was judged on this tree
(harness.series.judged).

What other pull requests do is a fact about them, not about the series:
harness.submission.related_work records it. Which of them the series fixes is
read from its patches' `Fixes #N` lines. An export may hold part of a tier's
series (`Part`: a first pull request, or the follow-up to one), and carries
what was measured on the target's tree: the wire facts of `BlockStored`
(harness.submission.wire_header), the lines the series changes outside tests/,
and the comparison with upstream's design (harness.submission.upstream_designs).
"""

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from harness import cache, processes
from harness.errors import ExportError, UnreadableInput
from harness.series.judged import code_digest, not_of_tree
from harness.series.model import Series
from harness.submission.base import Base
from harness.submission.call_cost import CallCost
from harness.submission.evidence import PatchEvidence, PatchTests, TestRun
from harness.submission.related_work import ISSUE, Standing
from harness.submission.submitter import Identity
from harness.submission.wire_header import WireFacts
from harness.targets import SELECTIONS, Target
from harness.verdict import read_verdict as verdict_file

_REFERENCE = re.compile(
    r"^(?P<verb>Fixes|Closes|Resolves|Follow-up to|Related to):? #(?P<number>\d+)\s*$",
    re.IGNORECASE | re.MULTILINE,
)
AI_TRAILER = re.compile(
    r"^(Co-authored-by|Assisted-by|Generated-by): .+$", re.MULTILINE | re.IGNORECASE
)
# The pull request's title when the series has several patches.
SERIES_TITLE = (
    "[Bugfix][KV Events] Make the KV-cache event stream reconstructable "
    "for partial prefix-cache entries"
)


@dataclass(frozen=True)
class Part:
    """The patches ``first``-``last`` (1-based) of a tier's ``total``, and
    the subjects of those before and after: the pull request this one
    follows, and its follow-up."""

    first: int
    last: int
    total: int
    earlier: tuple[str, ...] = ()
    later: tuple[str, ...] = ()
    # Committed straight onto the pristine tree, without the patches before
    # it: a pull request of its own, which follows none.
    alone: bool = False


@dataclass(frozen=True)
class Branch:
    """What an export committed in its scratch repository: the pristine
    tree (``base``, a scratch commit), then ``commits``, its own, on top of
    ``start`` (``base``, or the patches before a stacked part); ``named``
    is the release the texts name as the base."""

    target: Target
    tier: str
    submitter: Identity
    repo: Path
    pristine: Path
    base: str
    start: str
    commits: tuple[str, ...]
    part: Part | None
    named: Base
    series: Series
    patches: tuple[str, ...]  # the file names of the exported patches


@dataclass(frozen=True)
class Submission:
    target: Target
    tier: str
    submitter: Identity
    subjects: tuple[str, ...]
    messages: tuple[str, ...]
    tests: tuple[PatchTests, ...]
    evidence: tuple[PatchEvidence, ...] | None  # None: not run (--no-fail-before-fix)
    verdict: dict | None = None
    verdict_path: Path | None = None
    part: Part | None = None  # None: the tier's whole series
    wire: WireFacts | None = None
    cost: CallCost | None = None  # the calls' cost, measured at export
    changed_lines: int | None = None  # outside tests/, by git diff --numstat
    changed_lines_per_commit: tuple[int, ...] | None = None
    upstream: dict | None = None  # harness.submission.upstream_designs
    # The Validation command's tests: those of the target's selection that
    # the exported branch holds, then the commits' own (None: the selection).
    validation_tests: tuple[str, ...] | None = None
    # A part's Validation command, run on its branch at export.
    validation: TestRun | None = None
    named: Base | None = None  # the release the series is made against
    standing: Standing | None = None  # how the change stands upstream

    @property
    def base_name(self) -> str:
        """``v0.34.0 (62d4bc3c7)``: the release, as upstream names it."""
        if self.named is not None:
            return self.named.named()
        return self.target.source.release_name()

    @property
    def needs_issue(self) -> bool:
        """A pull request whose commits fix no issue: the export drafts one."""
        return not self.fixed_by

    @property
    def fixes(self) -> frozenset[str]:
        """The classes of docs/contract.md the tier's series fixes; none
        claimed for a part, whose share of them no run measured."""
        if self.part is not None:
            return frozenset()
        return self.target.fixes.get(self.tier, frozenset())

    @property
    def count(self) -> int:
        return len(self.subjects)

    @property
    def title(self) -> str:
        return self.subjects[0] if self.count == 1 else SERIES_TITLE

    @cached_property
    def fixed_by(self) -> dict[int, list[int]]:
        """Issue -> the patches (1-based) whose message says ``Fixes #N``."""
        fixed: dict[int, list[int]] = {}
        for number, message in enumerate(self.messages, 1):
            for verb, issue in issue_references(message):
                if verb == "Fixes":
                    fixed.setdefault(issue, []).append(number)
        return fixed

    @property
    def references(self) -> list[str]:
        """``Fixes #N`` (and other reference) lines of the series, once each."""
        seen: list[str] = []
        for message in self.messages:
            for verb, issue in issue_references(message):
                line = f"{verb} #{issue}"
                fixes = f"Fixes #{issue}"
                if line not in seen and fixes not in seen:
                    seen.append(line)
        return seen

    @property
    def about_issue(self) -> bool:
        """Whether the export is a fix of the issue the related work is
        recorded for: the tier's whole series, or commits that name it."""
        return self.part is None or any(
            issue == ISSUE
            for message in self.messages
            for _, issue in issue_references(message)
        )

    @property
    def ai_assisted(self) -> bool:
        return any(AI_TRAILER.search(message) for message in self.messages)

    @property
    def evidence_ok(self) -> bool:
        return self.evidence is not None and all(item.ok for item in self.evidence)

    @cached_property
    def verdict_gaps(self) -> list[str]:
        """Tests the series adds, in files the verdict ran, that it has no
        outcome for: a verdict made from another revision of the series.
        (A test in a file outside the verdict's selection is shown by the
        fail-before-fix runs instead.)"""
        if self.verdict is None:
            return []
        outcomes = self.verdict.get("patched", {}).get("outcomes", {})
        files = {node.split("::", 1)[0] for node in outcomes}
        return [
            test
            for test in self.added_tests
            if test.split("::", 1)[0] in files
            and not any(
                node == test or node.startswith(f"{test}[") for node in outcomes
            )
        ]

    @cached_property
    def upstream_tests_changed(self) -> list[list[str]]:
        """Per patch, the tests of the pristine tree it changes (not those an
        earlier patch of the series added)."""
        ours: set[str] = set()
        changed = []
        for patch in self.tests:
            changed.append([test for test in patch.changed if test not in ours])
            ours.update(patch.added)
        return changed

    @property
    def added_tests(self) -> list[str]:
        """The tests the series adds that are still there after its last patch."""
        added: list[str] = []
        for patch in self.tests:
            added = [t for t in added if t not in patch.removed] + list(patch.added)
        return added

    @property
    def validated(self) -> bool:
        """A passing verdict of this series, and fail-before-fix evidence for
        every patch; for a part, which no verdict measured, that evidence and
        its Validation command passing on its branch (where it ran)."""
        if self.part is not None:
            ran = self.validation
            return self.evidence_ok and (ran is None or ran.passed)
        return bool(
            self.verdict
            and self.verdict.get("passed")
            and not self.verdict_gaps
            and self.evidence_ok
        )


def patch_range(
    patches: tuple[int, int | None] | None, series: Series
) -> tuple[int, int]:
    """The (first, last) patches to export, 1-based, checked against the
    series: by default all of them."""
    count = len(series.entries)
    first, last = patches or (1, None)
    last = count if last is None else last
    if not 1 <= first <= last <= count:
        asked = str(first) if first == last else f"{first}-{last}"
        held = ", ".join(
            f"{number} {entry.patch}" for number, entry in enumerate(series.entries, 1)
        )
        raise ExportError(
            f"--patches {asked}: {series.series_file.name} lists {count} "
            f"patch{'es' if count > 1 else ''} ({held}); give a range within "
            f"1-{count}, numbered as the series file lists them"
        )
    return first, last


def series_part(
    first: int, last: int, series: Series, alone: bool = False
) -> Part | None:
    """What the export holds of the series, or None for all of it; the
    subjects of the others come from their mails' Subject lines."""
    count = len(series.entries)
    if (first, last) == (1, count):
        return None
    subjects = [subject_of(series.patch_path(entry)) for entry in series.entries]
    return Part(
        first,
        last,
        count,
        tuple(subjects[: first - 1]),
        tuple(subjects[last:]),
        alone,
    )


def subject_of(patch: Path) -> str:
    """A mail's subject, as `git am --keep-non-patch` keeps it."""
    lines = patch.read_text(encoding="utf-8", errors="replace").splitlines()
    for number, line in enumerate(lines):
        if line.startswith("Subject:"):
            folded = [line.removeprefix("Subject:")]
            for more in lines[number + 1 :]:
                if not more[:1].isspace():
                    break
                folded.append(more)  # a header folded over several lines
            return " ".join(part.strip() for part in folded)
        if line.startswith("---"):
            break
    return patch.name


def issue_references(message: str) -> list[tuple[str, int]]:
    """The ``Fixes #N``-style lines of a commit message: (verb, N)."""
    return [
        (match["verb"].capitalize(), int(match["number"]))
        for match in _REFERENCE.finditer(message)
    ]


def default_verdict(target: Target, tier: str) -> Path | None:
    """The newest report `python -m harness test` wrote for target and tier
    in this checkout (harness.cache.reports: another checkout's are its own)."""
    found = [
        path
        for selection in SELECTIONS
        if (path := cache.report(target.name, tier, selection)).is_file()
    ]
    return max(found, key=lambda path: path.stat().st_mtime) if found else None


def read_verdict(path: Path, target: Target, tier: str) -> dict:
    """The verdict at path as `Verdict.as_json` writes it, checked: one line
    naming the file if it cannot be read or is not a verdict
    (harness.verdict.read_verdict), or is for another target or tier."""
    verdict = verdict_file(path)
    if verdict.selection not in SELECTIONS:
        raise UnreadableInput(
            f"{path}: not a verdict of `python -m harness test`: selection "
            f"{verdict.selection!r} is none of {', '.join(SELECTIONS)}"
        )
    if (verdict.target, verdict.tier) != (target.name, tier):
        raise ExportError(
            f"the verdict {path} is for target {verdict.target} tier "
            f"{verdict.tier}, not target {target.name} tier {tier}"
        )
    return verdict.as_json()


def find_verdict(
    target: Target, tier: str, series: Series, verdict_path: Path | None
) -> tuple[dict | None, Path | None, list[str]]:
    """The verdict to quote (checked) and its path, None for both if there is
    none of this tree, and warnings. Only a verdict judged on this
    checkout's series and harness code is quoted (harness.series.judged),
    whether found in this checkout's reports or given with --verdict."""
    verdict_path = verdict_path or default_verdict(target, tier)
    rerun = f"`python -m harness test --target {target.name} --tier {tier}`"
    if verdict_path is None:
        return (
            None,
            None,
            [
                f"no verdict for target {target.name} tier {tier} in this "
                f"checkout's reports ({cache.reports()}); pr-body.md says so. "
                f"Run {rerun} first."
            ],
        )
    verdict = read_verdict(verdict_path, target, tier)
    warnings = []
    if not verdict.get("passed"):
        warnings.append(f"the verdict {verdict_path} is a FAIL")
    key = {"series_sha256": series.digest(), "harness_sha256": code_digest()}
    if other := not_of_tree(verdict.get("provenance", {}), key):
        # Nothing measured on another tree goes into a text.
        warnings.append(
            f"the verdict {verdict_path} is not of this tree: {other}; it is left "
            f"out, and pr-body.md says there is none. Run {rerun} first."
        )
        return None, None, warnings
    return verdict, verdict_path, warnings


def another_series(revision: str, series: Series) -> str | None:
    """Why the checkout at ``revision`` (a verdict's provenance) may not hold
    this series, or None. A revision that names no commit (older verdicts, a
    checkout without git) gives nothing to compare."""
    commit = revision.removesuffix("-dirty")
    if not re.fullmatch(r"[0-9a-f]{7,40}", commit):
        return None
    patches = series.series_file.parent
    known = processes.run(
        ["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=patches
    )
    if known.returncode:
        return "which this checkout does not have"
    # The series file and its patches, not the rest of the directory (a
    # benchmark's patch under patches/alternatives/ is no part of it).
    files = [series.series_file.name, *(entry.patch for entry in series.entries)]
    same = processes.run(["git", "diff", "--quiet", commit, "--", *files], cwd=patches)
    if same.returncode:
        shown = f"{patches.name}/{series.series_file.name}"
        return f"whose {shown} or its patches differ from this checkout's"
    return None
