"""What an export knows about the series it submits: the facts the cover
letter and the pull-request body are written from, gathered once.

Everything here comes from the series as committed in the export's scratch
repository (subjects, messages, the tests each patch adds or changes), from
the fail-before-fix runs, and from the verdict `python -m harness test`
wrote; nothing is typed in.
"""

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from harness.series.evidence import PatchEvidence, PatchTests
from harness.series.related import issue_references
from harness.series.submitter import Identity
from harness.targets import Target

AI_TRAILER = re.compile(
    r"^(Co-authored-by|Assisted-by|Generated-by): .+$", re.MULTILINE | re.IGNORECASE
)
# The pull request's title when the series has several patches.
SERIES_TITLE = (
    "[Bugfix][KV Events] Make the KV-cache event stream reconstructable "
    "for partial prefix-cache entries"
)


@dataclass(frozen=True)
class Submission:
    target: Target
    tier: str
    submitter: Identity
    subjects: tuple[str, ...]
    messages: tuple[str, ...]
    optional: frozenset[int]  # 1-based numbers of patches outside the default tier
    tests: tuple[PatchTests, ...]
    evidence: tuple[PatchEvidence, ...] | None  # None: not run (--no-fail-before-fix)
    verdict: dict | None = None
    verdict_path: Path | None = None

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
    def ai_assisted(self) -> bool:
        return any(AI_TRAILER.search(message) for message in self.messages)

    @property
    def evidence_ok(self) -> bool:
        return self.evidence is not None and all(item.ok for item in self.evidence)

    @cached_property
    def verdict_gaps(self) -> list[str]:
        """Tests the series adds that the verdict has no outcome for: a
        verdict made from another revision of the series."""
        if self.verdict is None:
            return []
        outcomes = self.verdict.get("patched", {}).get("outcomes", {})
        return [
            test
            for test in self.added_tests
            if not any(node == test or node.startswith(f"{test}[") for node in outcomes)
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
        every patch."""
        return bool(
            self.verdict
            and self.verdict.get("passed")
            and not self.verdict_gaps
            and self.evidence_ok
        )
