"""What a pull-request body says of a part of a tier's series
(`export --patches`): its commits' own messages as its description, where
it stands in the series, and only what was measured on its own branch.
"""

import re

from harness.submission.submission import Submission

_TRAILER = re.compile(r"^[A-Za-z][\w-]*: \S")
_REFERENCE_LINE = re.compile(
    r"^(Fixes|Closes|Resolves|Follow-up to|Related to):? #\d+\s*$", re.IGNORECASE
)


def own_text(sub: Submission) -> str:
    """The commits' own messages, as markdown: each without its subject, its
    trailers and its `Fixes #N` lines (the lead says those), its indented
    examples fenced; under its subject where there are several."""
    texts = [_message_markdown(message) for message in sub.messages]
    if sub.count == 1:
        return texts[0]
    return "\n\n".join(
        f"**{subject}**\n\n{text}"
        for subject, text in zip(sub.subjects, texts, strict=True)
    )


def _message_markdown(message: str) -> str:
    _, _, body = message.strip().partition("\n")
    kept = []
    paragraphs = re.split(r"\n\s*\n", body.strip())
    if paragraphs and all(map(_TRAILER.match, paragraphs[-1].splitlines())):
        paragraphs.pop()  # Signed-off-by: and the like
    for paragraph in paragraphs:
        lines = paragraph.splitlines()
        if not lines or all(map(_REFERENCE_LINE.match, lines)):
            continue
        if all(line.startswith("  ") for line in lines):
            indent = min(len(line) - len(line.lstrip()) for line in lines)
            example = "\n".join(line[indent:] for line in lines)
            if kept and kept[-1].endswith("\n```"):  # one block for one example
                kept[-1] = f"{kept[-1][:-3]}\n{example}\n```"
                continue
            paragraph = f"```\n{example}\n```"
        else:  # a pull request's description breaks a line where it has one
            paragraph = " ".join(line.strip() for line in lines)
        kept.append(paragraph)
    return "\n\n".join(kept)


def _on_its_own(sub: Submission) -> bool:
    """A part the record makes a pull request of its own, alone on the
    release: the rest of the series goes upstream otherwise (as comments for
    open pull requests), and is no context for it."""
    standing = sub.standing
    return bool(sub.part.alone and standing is not None and standing.pull_request)


def commits_named(first: int, last: int) -> str:
    return f"commit {first}" if first == last else f"commits {first}-{last}"


def part_note(sub: Submission) -> str:
    part = sub.part
    release = sub.target.source.release_name()
    if _on_its_own(sub):
        return f"It applies to {sub.base_name} on its own."
    if part.alone:
        others = (*part.earlier, *part.later)
        said = [
            f"This PR holds {commits_named(part.first, part.last)} of a series "
            f"of {part.total}, and applies to {release} on its own: it needs no "
            "other commit of the series."
        ]
        if others:
            said.append("The series' other commits: " + "; ".join(others) + ".")
        return " ".join(said)
    said = [
        f"This PR holds {commits_named(part.first, part.last)} of a series of "
        f"{part.total}."
    ]
    if part.earlier:
        said.append(
            f"It follows the PR of {commits_named(1, part.first - 1)} ("
            + "; ".join(part.earlier)
            + "), which must land first."
        )
    if part.later:
        said.append(
            f"A follow-up PR brings {commits_named(part.last + 1, part.total)} ("
            + "; ".join(part.later)
            + ")."
        )
    return " ".join(said)


def part_claims(sub: Submission) -> str:
    """What was measured on this branch: its commits' own tests, without and
    with their fixes; never the whole series' run."""
    series = (
        ""
        if _on_its_own(sub)
        else " The series' stream replay and test run measured another tree "
        "(all its commits together) and are not quoted."
    )
    lines = [
        "- Measured on this branch alone: each commit's own tests, without and "
        "with its fix, and vLLM's tests in the files its commits change "
        f"(Validation).{series}"
    ]
    if sub.evidence is None:
        lines.append(
            "- Those runs were not made for this description: no claim here is "
            "backed by a run."
        )
    else:
        lines += [f"- {item.subject}: {item.finding()}." for item in sub.evidence]
    if sub.validation is not None:
        lines.append(
            "- The Validation command on this branch: "
            f"{sub.validation.summary or 'pytest printed no summary'}."
        )
    return "\n".join(lines)
