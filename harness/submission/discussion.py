"""The RFC issue vLLM asks for above 500 changed lines, and the sections of
the tree's issue forms.

The RFC draft (`rfc_issue`) follows the sections of the target tree's own
RFC form (.github/ISSUE_TEMPLATE/750-RFC.yml), written from the same
Submission as the body; nothing here is posted by the harness. (A change
that an open pull request already makes is offered to it as a comment,
harness.submission.comment, not argued in an issue.)
"""

import re
from pathlib import Path

from harness.submission import pr_prose, upstream_designs
from harness.submission.pr_part import own_text
from harness.submission.related_work import ISSUE
from harness.submission.submission import Submission

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
    return form_sections(tree / RFC_FORM) or RFC_SECTIONS


def form_sections(form: Path) -> tuple[str, ...]:
    """The text-area labels of an issue form (.github/ISSUE_TEMPLATE/*.yml),
    in order; none where the tree has no such form."""
    try:
        text = form.read_text()
    except OSError:
        return ()
    found = [
        match["label"]
        for block in text.split("- type: ")
        if block.startswith("textarea")
        for match in [_LABEL.search(block)]
        if match
    ]
    return tuple(found)


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


ROW = {
    "ancestry": "reported boundaries (this change)",
    "holdings": "entries stored from their block start (this change)",
}


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
