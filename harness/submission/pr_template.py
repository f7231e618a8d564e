"""vLLM's pull-request template, `.github/PULL_REQUEST_TEMPLATE.md`: the
target tree's own, or a built-in copy of 0.33.0's for a tree without one,
filled in.

Each `## ` section's guidance comment is replaced by its content; a section
without content is left as the template has it, and reported. In the
checklist an item is ticked only when the fact its phrase names is true; the
rest is reported. This module knows nothing of the series:
harness.submission.pr_body says what each section holds and which facts are
true.
"""

import re
from pathlib import Path

TEMPLATE = Path(".github/PULL_REQUEST_TEMPLATE.md")
# vLLM 0.33.0's .github/PULL_REQUEST_TEMPLATE.md, for a tree without one.
BUILTIN_TEMPLATE = """\
<!-- markdownlint-disable -->

## Overview

<!-- Summarize the change in 1-2 lines. Link relevant issues and PRs. -->

## Claims

<!-- State the accomplishments in a few concrete bullets: speedups, feature support, bug fixes, etc. -->

## Validation

<!-- Show evidence that the claims are met by this change, and steps to reproduce validations. -->

## Details

<!-- Explain motivation, design decisions, root cause, tradeoffs, and limitations concisely. Link or collapse lengthy supporting material. -->

---

<details>
<summary> Pull Request Checklist </summary>

- [ ] I used vLLM's `/pr-checklist` skill. (Mandatory for agents, optional for humans).
- [ ] AI assistance was used during the creation of this PR.

- [ ] **Design Fit:** Minimizes impact on core components, reuses existing functionality, and justifies added complexity.
- [ ] **Testing and Validation:** Validates the change and ensures any added tests are meaningful and reliable, with CI coverage or documented CI resource constraints and validation performed outside CI.
- [ ] **Code Quality and Style:** Keeps code and comments clear and concise, and updates relevant documentation and examples.
- [ ] **Pull Request Contents:** Includes a brief summary and relevant links, supports claims with evidence, explains root causes and implementation trade-offs, and follows the contributing guide.
</details>

**BEFORE SUBMITTING, PLEASE READ <https://docs.vllm.ai/en/latest/contributing>** (anything written below this line will be removed by GitHub Actions)
"""  # noqa: E501
_HEADING = re.compile(r"^## +(?P<title>.+?)\s*$")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_BOX = re.compile(r"^(?P<lead>\s*- )\[ \](?P<text>.*)$")
_BOLD = re.compile(r"\*\*(?P<name>[^*]+?):?\*\*")
# Checklist items by a phrase they contain: ticked when the fact is true.
TICKS = (
    ("/pr-checklist", "pr_checklist_run"),
    ("AI assistance was used", "ai_assisted"),
    ("Testing and Validation", "validated"),
    ("The purpose of the PR", "always"),
    ("The test plan", "always"),
    ("The test results", "has_verdict"),
)


def read_template(tree: Path) -> tuple[str, str]:
    """The tree's template and where it came from, or the built-in one."""
    path = tree / TEMPLATE
    if path.is_file():
        return path.read_text(), str(TEMPLATE)
    return BUILTIN_TEMPLATE, "the built-in copy of vLLM 0.33.0's template"


def section_titles(template: str) -> set[str]:
    """The titles of the template's `## ` sections, in lower case."""
    _, sections, _ = _split(template)
    return {heading.lower() for heading, _ in sections}


def fill(
    template: str, contents: dict[str, str], facts: dict[str, bool]
) -> tuple[str, list[str]]:
    """The template with its sections filled from ``contents`` (lower-case
    title -> text; one the template has no section for is added at the end)
    and its checklist ticked from ``facts``; and what it leaves to the
    submitter."""
    head, sections, tail = _split(template)
    contents = dict(contents)
    left: list[str] = []
    parts = [_preamble(head)]
    for heading, guidance in sections:
        content = contents.pop(heading.lower(), None)
        if content is None:
            left.append(f"section {heading!r}")
            parts.append(f"## {heading}\n{guidance}")
        else:
            parts.append(f"## {heading}\n\n{content.strip()}\n\n")
    for heading, content in contents.items():
        parts.append(f"## {heading.title()}\n\n{content.strip()}\n\n")
    ticked, unticked = _tick(tail, facts)
    left += [f"checklist item {item!r}" for item in unticked]
    return "".join(parts) + ticked, left


def _split(template: str) -> tuple[str, list[tuple[str, str]], str]:
    """The text before the first section, (title, body) per `## ` section, and
    the tail from the first `---` line after the sections (the checklist)."""
    lines = template.splitlines(keepends=True)
    head, sections, tail = [], [], []
    for line in lines:
        if tail or (sections and line.strip() == "---"):
            tail.append(line)
        elif match := _HEADING.match(line):
            sections.append((match["title"], []))
        elif sections:
            sections[-1][1].append(line)
        else:
            head.append(line)
    return "".join(head), [(t, "".join(b)) for t, b in sections], "".join(tail)


def _preamble(head: str) -> str:
    """The template's head without its fill-in instructions (comments kept)."""
    kept = [
        line
        for line in head.splitlines()
        if line.strip() and _COMMENT.fullmatch(line.strip())
    ]
    return "".join(f"{line}\n" for line in kept) + ("\n" if kept else "")


def _tick(tail: str, facts: dict[str, bool]) -> tuple[str, list[str]]:
    out, unticked = [], []
    for line in tail.splitlines(keepends=True):
        box = _BOX.match(line.rstrip("\n"))
        if box:
            fact = next((f for phrase, f in TICKS if phrase in box["text"]), None)
            if fact and facts[fact]:
                line = f"{box['lead']}[x]{box['text']}\n"
            else:
                bold = _BOLD.search(box["text"])
                text = box["text"].strip()
                unticked.append(bold["name"] if bold else re.split(r"[,.] ", text)[0])
        out.append(line)
    return "".join(out), unticked
