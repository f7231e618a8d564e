"""Upstream work related to the series: the duplicate-work statement that
vLLM's AGENTS.md asks of an AI-assisted pull request.

What other pull requests do is a fact about them, not about the series, so it
is written down here, with the day it was last checked (CHECKED_ON). Update
both whenever the open pull requests are checked again; `export` warns when
the check is older than STALE_AFTER_DAYS. Which of these the series fixes is
read from its patches' `Fixes #N` lines.
"""

import re
from dataclasses import dataclass
from datetime import date

ISSUE = 58119
CHECKED_ON = date(2026, 11, 30)
STALE_AFTER_DAYS = 14
REPOSITORY = "vllm-project/vllm"
# AGENTS.md's duplicate-work checks, as run for this series.
CHECK_COMMANDS = (
    f"gh issue view {ISSUE} --repo {REPOSITORY} --comments",
    f'gh pr list --repo {REPOSITORY} --state open --search "{ISSUE} in:body"',
    f'gh pr list --repo {REPOSITORY} --state open --search "cache_partial_block"',
    f'gh pr list --repo {REPOSITORY} --state open --search "BlockStored parent"',
)
_REFERENCE = re.compile(
    r"^(?P<verb>Fixes|Closes|Resolves|Follow-up to|Related to):? #(?P<number>\d+)\s*$",
    re.IGNORECASE | re.MULTILINE,
)


@dataclass(frozen=True)
class RelatedWork:
    number: int
    what: str  # what it does, in a line
    relation: str  # how the series stands to it


RELATED_WORK = (
    RelatedWork(
        58121,
        "(draft, stacked on #44488) the same defect: fills the skipped_* fields "
        "that #44488 adds to BlockStored",
        "an alternative, not a complement: it adds no field, keeps every "
        "existing event byte for byte, and also removes what it reports; one of "
        "the two should land",
    ),
    RelatedWork(
        44488,
        "optional skipped_* context on BlockStored for null or masked blocks in "
        "cache_full_blocks() (#44451)",
        "meant to coexist: that gap (sliding window, Mamba align mode) is left "
        "to it, and neither needs the other; nearby lines in BlockPool, so the "
        "second to land rebases",
    ),
    RelatedWork(
        57339,
        "builds cache_partial_block()'s BlockStored with _build_block_stored_event",
        "rewrites the same construction: a textual conflict, no change in "
        "behaviour for either",
    ),
    RelatedWork(
        52972,
        "makes cache_partial_block() refuse a boundary its block has outgrown (#49125)",
        "changes the same method's guard; a boundary it refuses is never "
        "registered, so this series reports no ancestry for it: a textual "
        "conflict only",
    ),
    RelatedWork(
        58394,
        "the promotion case: a promoted entry's parent is the boundary just removed",
        "left as upstream's tests pin it, unless a patch below fixes it",
    ),
)
EARLIER_FILL_ONLY = (
    f"An earlier pull request for #{ISSUE} emitted the skipped boundaries and "
    f"never removed them (they then stay live in every consumer); its author "
    f"closed it as a duplicate of #58121."
)


def issue_references(message: str) -> list[tuple[str, int]]:
    """The ``Fixes #N``-style lines of a commit message: (verb, N)."""
    return [
        (match["verb"].capitalize(), int(match["number"]))
        for match in _REFERENCE.finditer(message)
    ]


def related_work_lines(fixed_by: dict[int, list[int]], count: int) -> list[str]:
    """One Markdown bullet per related pull request or issue; ``fixed_by``
    maps an issue to the patches (1-based) that say they fix it."""
    lines = []
    for work in RELATED_WORK:
        relation = work.relation
        if work.number in fixed_by:
            patches = ", ".join(f"{n}/{count}" for n in fixed_by[work.number])
            relation = f"fixed by patch {patches}"
        lines.append(f"- #{work.number} {work.what}. Here: {relation}.")
    return lines


def check_age(today: date) -> int:
    return (today - CHECKED_ON).days
