"""The issue a fix of no reported issue drafts, in the sections of the
target tree's bug-report form (.github/ISSUE_TEMPLATE/400-bug-report.yml).

vLLM's pull requests fix issues: a change whose commits carry no
`Fixes #N` comes with `issue-draft.md`, the bug it fixes as a user would
report it: the release, the machine its reproduction ran on, the defect in
the commit's own words, where it was reported outside vLLM (the
related-work record), and the fix's own test failing on the release
without the fix (its fail-before-fix run). The submitter opens it, pastes
`python collect_env.py` where the form asks, and puts its number in the
pull request's `Fixes #____`.
"""

import platform
import re
from pathlib import Path

from harness.submission.discussion import form_sections
from harness.submission.gitrepo import BRANCH
from harness.submission.submission import Submission

ISSUE_DRAFT = "issue-draft.md"
BUG_FORM = Path(".github/ISSUE_TEMPLATE/400-bug-report.yml")
# vLLM 0.34.0's bug-report form, for a tree without one.
BUG_SECTIONS = ("Your current environment", "🐛 Describe the bug")
LEFT = (
    f"the issue: open it from {ISSUE_DRAFT} (with `python collect_env.py`'s "
    "output where it says so), then put its number in pr-body.md's `Fixes #____`"
)
_TAGS = re.compile(r"^(\[[^\]]*\])+\s*")


def sections(tree: Path) -> tuple[str, ...]:
    """The text-area labels of the tree's bug-report form."""
    return form_sections(tree / BUG_FORM) or BUG_SECTIONS


def render(sub: Submission, labels: tuple[str, ...]) -> str:
    """The draft: its title, then each of the form's sections."""
    standing = sub.standing
    title = standing.bug if standing and standing.bug else _TAGS.sub("", sub.title)
    content = {"environment": environment(sub), "bug": described(sub)}
    parts = [f"# [Bug]: {title}"]
    for label in labels:
        key = next((name for name in content if name in label.lower()), None)
        parts.append(f"## {label}\n\n{content.get(key, '')}".rstrip())
    parts.append(
        "Prepared with AI assistance (Claude); I, "
        f"{sub.submitter.name}, reviewed it and can answer for it."
    )
    return "\n\n".join(parts) + "\n"


def environment(sub: Submission) -> str:
    ran = (
        f"Reproduced on {sub.base_name}, {sub.target.source.release_name()} as "
        f"released, on CPU (`VLLM_TARGET_DEVICE=cpu`), Python "
        f"{platform.python_version()} on {platform.system()} {platform.machine()}"
    )
    return (
        f"{ran}.\n\n<details>\n<summary>The output of <code>python collect_env.py"
        "</code></summary>\n\n```text\n(to be pasted by the submitter)\n```\n\n"
        "</details>"
    )


def described(sub: Submission) -> str:
    """The defect in the commit's own words, where it is reported, and the
    fix's test failing on the release."""
    parts = [_problem(sub.messages[0])]
    standing = sub.standing
    if standing and standing.reports:
        parts.append("Reported outside vLLM: " + "; ".join(standing.reports) + ".")
    before = sub.evidence[0].before if sub.evidence else None
    if before is None:
        parts.append("(The fix's test was not run for this draft.)")
        return "\n\n".join(parts)
    gate = (
        "; vLLM 0.34's Triton gate lifted in the run, as an x86 CPU without "
        "triton-cpu needs"
        if before.gate == "bypassed"
        else ""
    )
    parts += [
        f"To reproduce: the fix's own test, alone on {sub.base_name}, as the "
        f"commands below run it on the fix's pull-request branch `{BRANCH}`"
        f"{gate}:",
        "```console\n"
        + "\n".join([*(f"$ {command}" for command in before.commands), *before.lines])
        + "\n```",
    ]
    return "\n\n".join(parts)


def _problem(message: str) -> str:
    """The first paragraph of a commit message's body, on one line."""
    _, _, body = message.strip().partition("\n")
    paragraphs = [part for part in re.split(r"\n\s*\n", body.strip()) if part]
    first = paragraphs[0] if paragraphs else ""
    return " ".join(line.strip() for line in first.splitlines())
