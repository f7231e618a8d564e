"""What a submitter posts before the pull request: the comment on the issue
that offers the measurements to the open pull request, and the RFC issue vLLM asks for
above 500 changed lines.

vLLM's AGENTS.md: "If an open PR already addresses the same fix, do not open
another. If your approach is materially different, explain the difference in
the issue." #58121 is open for #58119, so the export writes that explanation
(`issue_comment`), with the numbers of the comparison where they were
measured, and CONTRIBUTING.md says to post it and wait. The RFC draft
(`rfc_issue`) follows the sections of the target tree's own RFC form
(.github/ISSUE_TEMPLATE/750-RFC.yml). Both are written from the same
Submission as the body; nothing here is posted by the harness.
"""

import re
from pathlib import Path

from harness.submission import pr_body, pr_prose, upstream_designs
from harness.submission.pr_part import own_text
from harness.submission.related_work import ALTERNATIVE, ISSUE
from harness.submission.submission import Submission

ISSUE_COMMENT = "issue-comment.md"
RFC_ISSUE = "rfc-issue.md"
RFC_FORM = Path(".github/ISSUE_TEMPLATE/750-RFC.yml")
# vLLM 0.33.0's RFC form, for a tree without one.
RFC_SECTIONS = (
    "Motivation",
    "Proposed Change",
    "Feedback Period",
    "CC List",
    "Any Other Things",
)
_LABEL = re.compile(r"^\s*label:\s*(?P<label>.+?)\.?\s*$", re.MULTILINE)


def rfc_sections(tree: Path) -> tuple[str, ...]:
    """The text-area labels of the tree's RFC form, in order."""
    try:
        text = (tree / RFC_FORM).read_text()
    except OSError:
        return RFC_SECTIONS
    found = [
        match["label"]
        for block in text.split("- type: ")
        if block.startswith("textarea")
        for match in [_LABEL.search(block)]
        if match
    ]
    return tuple(found) or RFC_SECTIONS


def _commits(sub: Submission) -> list[str]:
    per_commit = sub.changed_lines_per_commit or (None,) * sub.count
    return [
        f"{number}. {subject}"
        + (f" ({lines} changed lines outside `tests/`)" if lines is not None else "")
        for number, (subject, lines) in enumerate(
            zip(sub.subjects, per_commit, strict=True), 1
        )
    ]


def _comparison(sub: Submission) -> list[str]:
    if sub.upstream is None:
        return [
            "(No side-by-side measurement of the two designs on this tree, as "
            f"exported on {sub.target.source.release_name()}, is quoted: none "
            "measured it.)"
        ]
    return [
        "Measured side by side on "
        f"{sub.upstream.get('release', sub.target.source.release_name())}, "
        "with #44488 and #58121 re-implemented from their descriptions:",
        "",
        *upstream_designs.table(
            sub.upstream, sub.tier, ROW[sub.target.stream(sub.tier)], "-"
        ),
    ]


# How the comment puts this change, by what the tier's stream is.
APPROACH = {
    "ancestry": (
        "the pool reports the skipped boundaries as ordinary `BlockStored` "
        "events at the hash block size, then the entry's store unchanged, and "
        "removes the boundaries right after it, so the consumers that read "
        "the stream today place the entry with no change and hold nothing the "
        "pool does not; in exchange the stream carries more events."
    ),
    "holdings": (
        "the partial entry's own `BlockStored` spans from its cache block's "
        "start, under the hash that ends there (`block_size` is the span), "
        "so its parent is a hash the pool holds and no boundary that no "
        "lookup ends at is announced; consumers that read the stream today "
        "place it with no change, and a router predicts exactly the hits the "
        "engine serves. In exchange three upstream tests that pin the old "
        "event shape change, and the store carries the tokens from its block "
        "start."
    ),
}
ROW = {
    "ancestry": "reported boundaries (this change)",
    "holdings": "entries stored from their block start (this change)",
}
CHOICE = {
    "ancestry": "reported boundaries",
    "holdings": "the entry stored from its cache block's start",
}


def issue_comment(sub: Submission) -> str:
    """The comment for the issue: how this differs from the open pull
    request, with numbers, and the question for a maintainer."""
    release = sub.target.source.release_name()
    wire = pr_prose.wire_paragraph(sub.wire, "the alternative")
    lines = [
        f"#{ALTERNATIVE} is open for this defect. I measured what the stream's "
        "consumers predict with it and with another approach, and offer the "
        f"measurements and tests to #{ALTERNATIVE} and #44488 rather than a "
        "competing pull request.",
        "",
        f"- #{ALTERNATIVE} (stacked on #44488) keeps the partial entry as the "
        "only hash a consumer indexes and describes the skipped boundaries in "
        "new optional fields (`skipped_parent_block_hash`, `skipped_token_ids`, "
        "`skipped_extra_keys`), which a consumer must read to place the entry.",
        f"- The other approach measured: {APPROACH[sub.target.stream(sub.tier)]}",
        "",
        *_comparison(sub),
    ]
    if wire:
        lines += ["", wire]
    lines += [
        "",
        f"If a maintainer would rather take {CHOICE[sub.target.stream(sub.tier)]} "
        f"than the `skipped_*` fields (#44488 + #{ALTERNATIVE}) for {release} "
        f"and main, it is {sub.count} commit(s):",
        "",
        *_commits(sub),
    ]
    if pr_body.needs_rfc(sub):
        lines += [
            "",
            f"It changes {sub.changed_lines} lines outside `tests/`, over the "
            f"{pr_body.RFC_LINE_LIMIT} above which vLLM asks for an RFC, so I "
            "would open that first.",
        ]
    lines += ["", _disclosure(sub)]
    return "\n".join(lines) + "\n"


def rfc_issue(sub: Submission, sections: tuple[str, ...]) -> str:
    """The RFC issue's title and sections, in the tree's form."""
    # A part says what its own commits say; the series' prose is the tier's.
    motivation = (
        [
            f"#{ISSUE}. {pr_prose.PROBLEM.replace('This PR', 'This change')}",
            pr_prose.ROOT_CAUSE,
        ]
        if sub.part is None
        else [own_text(sub)]
    )
    content = {
        "motivation": "\n\n".join(motivation),
        "proposed change": "\n".join(
            [
                *([pr_prose.design(sub.fixes), ""] if sub.part is None else []),
                f"{sub.changed_lines} changed lines outside `tests/` "
                f"(`git diff --numstat`), in {sub.count} commit(s):",
                "",
                *_commits(sub),
            ]
        ),
        "feedback period": "One week from posting.",
        "any other things": "\n".join(
            [*_comparison(sub), "", pr_prose.wire_paragraph(sub.wire, "it")]
        ).strip(),
    }
    parts = [f"# [RFC]: {sub.title.split('] ')[-1]}"]
    for section in sections:
        text = content.get(section.lower(), "")
        parts.append(f"## {section}\n\n{text}".rstrip())
    parts.append(_disclosure(sub))
    return "\n\n".join(parts) + "\n"


def _disclosure(sub: Submission) -> str:
    return (
        "Prepared with AI assistance (Claude); I, "
        f"{sub.submitter.name}, reviewed it and can answer for it."
    )
