"""The pull requests and issues that touch what the series touches, and how
the series stands to each: the duplicate-work statement vLLM's AGENTS.md asks
of an AI-assisted pull request.

What other pull requests do is a fact about them, not about the series, so
it is a record here, with a short quote from each one's public text (the
author and the day), and the day the record was last checked, CHECKED_ON:
update both whenever the open pull requests are checked again; `export`
warns when the check is older than STALE_AFTER_DAYS. How the series stands
to a pull request can depend on what the export holds: ``when_fixed`` says
it for an export that fixes that class of defect (docs/contract.md), and a
`Fixes #N` line of a patch says it for that patch.

Each change of the series has a standing of its own (`STANDINGS`, by its
patch's file name, the same in every release's backport): no open pull
request does it, it duplicates an open one, or it competes with one. The
export makes a pull request only of changes with no open one, and a
comment for the open pull request of any other, with that pull request's
design as `patches/alternatives/` re-implements it.
"""

from dataclasses import dataclass, field
from datetime import date

from harness.errors import ExportError

ISSUE = 58119
CHECKED_ON = date(2026, 12, 1)
STALE_AFTER_DAYS = 14
REPOSITORY = "vllm-project/vllm"
# The open pull request for the same issue, which the partial-entry changes
# duplicate: their measurements go to it as a comment.
ALTERNATIVE = 58121
# AGENTS.md's duplicate-work checks, as run for this series.
CHECK_COMMANDS = (
    f"gh issue view {ISSUE} --repo {REPOSITORY} --comments",
    f'gh pr list --repo {REPOSITORY} --state open --search "{ISSUE} in:body"',
    f'gh pr list --repo {REPOSITORY} --state open --search "cache_partial_block"',
    f'gh pr list --repo {REPOSITORY} --state open --search "BlockStored parent"',
)


@dataclass(frozen=True)
class RelatedWork:
    number: int
    what: str  # what it does, in a line
    quote: str  # from its public text
    source: str  # who said it, and when
    relation: str  # how the series stands to it
    when_fixed: tuple[str, str] | None = (
        None  # (class, relation) if the export fixes it
    )


RELATED_WORK = (
    RelatedWork(
        ALTERNATIVE,
        "the same defect, draft, stacked on #44488: fills #44488's optional "
        "skipped_* fields on the partial entry's store",
        "Consumers can reconstruct `H1664` without treating it as a resident "
        "cache entry.",
        "its description, 2026-09-22",
        "the other way to fix #58119: there the entry stays the only hash a "
        "consumer indexes, and a consumer must read three new fields to place "
        "it; here the skipped boundaries are ordinary stores that consumers "
        "already read, and a router also sees boundaries the engine cannot "
        "serve. Both rewrite what `cache_partial_block()` emits, so one should "
        "land; the export offers the measurements to this one as a comment",
    ),
    RelatedWork(
        44488,
        "optional `skipped_parent_block_hash`, `skipped_token_ids` and "
        "`skipped_extra_keys` on `BlockStored`, and dense stores around null or "
        "masked blocks in `cache_full_blocks()` (#44451)",
        "@Change72 is right that nothing consumes the skipped fields yet.",
        "a reviewer, 2026-08-17",
        "not touched: this PR leaves `cache_full_blocks()` as it is; "
        "nearby lines in `BlockPool`, so the second to land rebases",
        (
            "K4",
            "the same stores of `cache_full_blocks()`, fixed here without a new "
            "field (dense runs under a block the pool holds); one of the two "
            "should land",
        ),
    ),
    RelatedWork(
        57339,
        "builds `cache_partial_block()`'s `BlockStored` with "
        "`_build_block_stored_event`",
        "#57339 centralizes partial-event construction through "
        "`_build_block_stored_event`, but does not populate the missing ancestry.",
        "#58121's description, 2026-09-22",
        "rewrites the same construction: a textual conflict, no change in "
        "behaviour for either",
    ),
    RelatedWork(
        52972,
        "with #53158, a guard in `cache_partial_block()` for a boundary its "
        "block has outgrown (#49125)",
        "`cache_partial_block` now refuses a boundary the block has already "
        "outgrown (`block_hash_num_tokens >= incoming_num_tokens`) and returns "
        "`None`.",
        "its author, 2026-08-26",
        "a boundary it refuses is never registered, so this PR reports no "
        "ancestry for it: a textual conflict in the same method only",
    ),
    RelatedWork(
        58394,
        "the promotion case: a promoted entry's parent is the boundary just removed",
        "the pool emits BlockRemoved for the old boundary and a BlockStored "
        "whose parent_block_hash is that removed hash",
        "the earlier pull request for #58119",
        "not changed: upstream's tests pin those events",
        ("K3", "fixed by this PR"),
    ),
)
EARLIER_FILL_ONLY = (
    f"An earlier pull request for #{ISSUE} emitted the skipped boundaries and "
    f"never removed them (they then stay live in every consumer); its author "
    f'closed it as a duplicate of #{ALTERNATIVE}: "Since #{ALTERNATIVE} is '
    f"stacked on that in-flight PR, it is the one aligned with the direction "
    f'of travel, so it should be the one that lands."'
)


def relation(work: RelatedWork, fixes: frozenset[str]) -> str:
    """How an export that fixes ``fixes`` stands to ``work``."""
    if work.when_fixed and work.when_fixed[0] in fixes:
        return work.when_fixed[1]
    return work.relation


def related_work_age(today: date) -> int:
    """Days since the related work was last checked."""
    return (today - CHECKED_ON).days


NO_OPEN_PR, DUPLICATES = "no open pull request", "duplicates"
COMPETES = "competes with"


@dataclass(frozen=True)
class Standing:
    """How one change stands upstream, as last checked: ``kind`` is one of
    NO_OPEN_PR, DUPLICATES (an open pull request fixes the same defect) or
    COMPETES (one changes the same events another way), ``pull`` that pull
    request; ``design`` the file of patches/alternatives/ that
    re-implements its design; for a change no issue reports, ``bug`` the
    title of the issue it drafts and ``reports`` where the defect is
    reported outside vLLM."""

    kind: str
    checked_on: date
    source: str  # who decided it, and where
    why: str  # a sentence
    pull: int | None = None
    design: str | None = None
    bug: str | None = None
    reports: tuple[str, ...] = field(default_factory=tuple)
    # What the submitter searches open pull requests for before opening one.
    search: str | None = None

    @property
    def pull_request(self) -> bool:
        """Whether the change is to be its own pull request."""
        return self.kind == NO_OPEN_PR

    def said(self) -> str:
        """``duplicates #58121``, ``no open pull request``."""
        return self.kind if self.pull is None else f"{self.kind} #{self.pull}"


_REVIEW = "the maintainer's review of the exported pull requests (issue 48)"
_REVIEWED_ON = date(2026, 12, 5)
# 0002 and 0004 rewrite the same store in two ways: both duplicate #58121.
_DUPLICATES_58121 = Standing(
    DUPLICATES,
    _REVIEWED_ON,
    _REVIEW,
    "both rewrite the partial entry's `BlockStored` in `cache_partial_block()`: "
    "one of them should land",
    ALTERNATIVE,
    "upstream-44488-58121.patch",
)
STANDINGS = {
    "0001-core-publish-prefix-cache-reset-events-at-once.patch": Standing(
        NO_OPEN_PR,
        _REVIEWED_ON,
        _REVIEW,
        "no open pull request publishes a prefix-cache reset's events when "
        "the reset happens, and no issue reports it",
        bug="A prefix-cache reset reaches KV-event consumers only with the "
        "next step's output",
        search="reset_prefix_cache kv events",
        reports=("vllm-project/aibrix#2287, from a KV-aware router's side",),
    ),
    "0002-kv-events-store-partial-entry-from-its-cache-block-start.patch": (
        _DUPLICATES_58121
    ),
    "0003-kv-events-store-block-after-skipped-blocks-with-its-span.patch": Standing(
        COMPETES,
        _REVIEWED_ON,
        _REVIEW,
        "both rewrite the stores `cache_full_blocks()` emits after null or "
        "masked blocks (#44451): one of them should land",
        44488,
        "upstream-44488.patch",
    ),
    "0004-kv-events-report-partial-entry-ancestry.patch": _DUPLICATES_58121,
}


def standing(patch: str) -> Standing | None:
    """The recorded standing of the change in ``patch`` (a file name), or
    None for a change the record does not hold."""
    return STANDINGS.get(patch)


def choose(series_file: str, entries, first: int, last: int) -> Standing | None:
    """How patches ``first``-``last`` of a series file's ``entries`` stand
    upstream: None where none has an open pull request (a pull request of
    its own), else the standing they share (a comment for that pull
    request); one line refusing a range whose patches stand differently."""
    found = [
        (number, entry.patch, standing(entry.patch))
        for number, entry in enumerate(entries, 1)
        if first <= number <= last
    ]
    standings = [item for _, _, item in found]
    opened = {item.pull for item in standings if item and not item.pull_request}
    if not opened:
        return None
    if len(opened) == 1 and all(item and not item.pull_request for item in standings):
        return standings[0]
    held = "; ".join(
        f"{number} {patch}: {item.said() if item else 'not recorded'}"
        for number, patch, item in found
    )
    raise ExportError(
        f"--patches {first}-{last} of {series_file} holds changes that stand "
        f"apart upstream (harness/submission/related_work.py): {held}; export "
        "a pull request of those with no open one and a comment for each open "
        "pull request apart (--patches N for each)"
    )
