"""What the pull-request description says, section by section, and which of
the template's checklist facts are true; the cover letter of the mails
carries the same sections.

Written from a Submission (harness.submission.submission): the patches' subjects
and `Fixes` lines, the verdict's numbers, the fail-before-fix runs, the wire
measurement, the comparison with upstream's design and the related-work
record. Every number is read from one of those; the prose is
harness.submission.pr_prose's. The sections follow the template's layout (0.32
and later: Overview, Claims, Validation, Details; older releases: Purpose,
Test Plan, Test Result), which harness.submission.pr_template fills. A reviewer
reads the body without the harness: a rule or class is named in plain words,
and any id of docs/contract.md that a subject or a table still shows is
explained in a closing legend.
"""

import re

from harness.submission import (
    call_cost,
    pr_findings,
    pr_prose,
    pr_template,
    upstream_designs,
)
from harness.submission.gitrepo import BRANCH
from harness.submission.pr_part import own_text, part_claims, part_note
from harness.submission.related_work import (
    ALTERNATIVE,
    CHECK_COMMANDS,
    CHECKED_ON,
    EARLIER_FILL_ONLY,
    ISSUE,
    RELATED_WORK,
    relation,
)
from harness.submission.submission import Submission
from harness.trees.env import SHOWN_ENV

# vLLM asks for an RFC issue before changes over this many lines (tests,
# kernels, data and config excluded).
RFC_LINE_LIMIT = 500
# The ids of docs/contract.md, wherever they are left in the body.
CONTRACT_ID = re.compile(r"\b[CK][1-8]\b")
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)


def render(template: str, submission: Submission) -> tuple[str, list[str]]:
    """The template filled in for the submission, and the sections and
    checklist items it leaves to the submitter."""
    titles = pr_template.section_titles(template)
    body, left = pr_template.fill(
        template, sections(submission, titles), _facts(submission)
    )
    if not submission.about_issue:
        left.append(
            "the duplicate-work check of this change's own subject (`gh pr list "
            "--repo vllm-project/vllm --state open --search ...`)"
        )
    if needs_rfc(submission):
        left.append("the link to the RFC issue in the 'Size' paragraph")
    return body, left


def sections(submission: Submission, titles: set[str]) -> dict[str, str]:
    """Section title (lower case) -> content, for the template's layout:
    vLLM 0.32 and later, or the older Purpose / Test Plan / Test Result."""
    if "purpose" in titles and "overview" not in titles:
        found = {
            "purpose": "\n\n".join(
                [overview(submission), claims(submission), details(submission)]
            ),
            "test plan": test_plan(submission),
            "test result": test_result(submission),
        }
    else:
        found = {
            "overview": overview(submission),
            "claims": claims(submission),
            "validation": test_plan(submission) + "\n\n" + test_result(submission),
            "details": details(submission),
        }
    legend = ids_legend(" ".join(found.values()))
    if legend:
        last = next(reversed(found))
        found[last] += "\n\n" + legend
    return found


def ids_legend(text: str) -> str:
    """One line naming, in plain words, each id of docs/contract.md that
    ``text`` uses outside code."""
    used = sorted(set(CONTRACT_ID.findall(_CODE.sub("", text))))
    if not used:
        return ""
    meanings = "; ".join(f"{name}: {pr_prose.plain(name)}" for name in used)
    return f"**Terms.** {meanings}."


def overview(sub: Submission) -> str:
    references = sub.references or (["Fixes #____"] if sub.needs_issue else [])
    lead = f"{'. '.join(references)}. " if references else ""
    # A part says what its own commits say; the series' problem is the tier's.
    lines = [lead + (pr_prose.PROBLEM if sub.part is None else own_text(sub))]
    if sub.about_issue and any(work.number == ALTERNATIVE for work in RELATED_WORK):
        numbers = ", with numbers" if sub.upstream is not None else ""
        said = (
            f"Details compares the two{numbers}."
            if sub.part is None
            else "Details says how this change stands to it."
        )
        lines += ["", f"#{ALTERNATIVE} fixes the same issue another way; {said}"]
    if sub.part is not None:
        lines += ["", part_note(sub)]
    lines += ["", f"Commits, against {sub.base_name}:", ""]
    changed = sub.upstream_tests_changed
    for number, subject in enumerate(sub.subjects, 1):
        notes = [f"changes upstream's `{_name(test)}`" for test in changed[number - 1]]
        lines.append(
            f"{number}. {subject}" + (f" ({'; '.join(notes)})" if notes else "")
        )
    return "\n".join(lines)


def claims(sub: Submission) -> str:
    if sub.part is not None:
        return part_claims(sub)
    if sub.verdict is None:
        return (
            "- No test run was found for this series: no claim here is backed by a run."
        )
    lines = pr_findings.class_claims(sub)
    lines += pr_findings.stream_claims(sub)
    lines.append(pr_findings.tests_claim(sub.verdict))
    return "\n".join(lines)


def validation_command(sub: Submission) -> str:
    """The pytest command of Validation: the tests the branch holds."""
    selection = (sub.verdict or {}).get("selection", "ci")
    tests = sub.validation_tests
    if tests is None:
        tests = sub.target.selection(selection)
    environment = SHOWN_ENV
    return f"{environment} PYTHONPATH=. python -m pytest {' '.join(tests)}"


def test_plan(sub: Submission) -> str:
    selection = (sub.verdict or {}).get("selection", "ci")
    checker = (
        f"python -m harness test --target {sub.target.name} --tier {sub.tier} "
        f"--selection {selection}"
    )
    ran = (
        "The run below took that selection on both trees, and replayed "
        f"{pr_prose.WORKLOADS} against a checker of the stream, with the "
        f"submitter's test harness (not part of this PR): `{checker}`. "
        if sub.part is None
        else ""
    )
    trees = (
        f"CPU only: {sub.base_name} as released, and this branch. vLLM's tests, "
        "on each tree:"
        if sub.part is None
        else f"CPU only, on this branch ({sub.base_name} and these commits). "
        "vLLM's tests in the files these commits change, and their own:"
    )
    return "\n".join(
        [
            trees,
            "",
            "```",
            validation_command(sub),
            "```",
            "",
            f"{ran}Each commit's own tests, without and with its fix, follow; "
            f"the commands name the commits on the branch `{BRANCH}`.",
        ]
    )


def test_result(sub: Submission) -> str:
    if sub.verdict is not None:
        lines = pr_findings.run_lines(sub)
    elif sub.part is not None:
        lines = pr_findings.validation_lines(sub)
    else:
        lines = [
            "No test run was found for this series; vLLM's tests and the stream "
            "replay have not been run for this description."
        ]
    lines += ["", *pr_findings.evidence_lines(sub)]
    return "\n".join(lines)


def details(sub: Submission) -> str:
    whole = sub.part is None
    # A part's wire paragraph only where its commits are about BlockStored.
    stores = whole or any("BlockStored" in message for message in sub.messages)
    parts = [
        pr_prose.ROOT_CAUSE if whole else "",
        pr_prose.design(sub.fixes, sub.target.stream(sub.tier)) if whole else "",
        pr_prose.wire_paragraph(sub.wire) if stores else "",
        call_cost.paragraph(sub.cost),
        comparison(sub),
        pr_findings.limitations(sub),
        size(sub),
        pr_prose.NO_MODEL_EVAL,
        duplicate_check(sub),
        ai_statement(sub),
    ]
    return "\n\n".join(part for part in parts if part)


def comparison(sub: Submission) -> str:
    """The comparison with upstream's design, as measured, if it was."""
    if sub.upstream is None:
        return ""
    lines = [
        f"**Against #{ALTERNATIVE}.** #44488 and #{ALTERNATIVE}, re-implemented "
        f"from their descriptions on {sub.upstream['release']} (a benchmark, not "
        "part of this PR), measured beside this series with the same workloads "
        "and checker; a consumer either ignores map keys it does not know (as "
        "Dynamo's decoder does) or reads the `skipped_*` fields:",
        "",
        *upstream_designs.table(sub.upstream, sub.tier),
    ]
    wanted = upstream_designs.still_wanted(sub.upstream, sub.fixes)
    if wanted:
        left = pr_findings.counts(pr_findings.report(sub.verdict), "classes")
        fixed = all(not row["patched"] for cls, row in left.items() if cls in sub.fixes)
        verb = "fix" if left and fixed else "are meant to fix"
        lines += [
            "",
            f"With #{ALTERNATIVE} in, a consumer that reads the new fields still "
            "finds " + "; ".join(wanted) + f", which these commits {verb}.",
        ]
    return "\n".join(lines)


def changed_lines(sub: Submission) -> int:
    return sub.changed_lines or 0


def needs_rfc(sub: Submission) -> bool:
    return changed_lines(sub) > RFC_LINE_LIMIT


def size(sub: Submission) -> str:
    if sub.changed_lines is None:
        return ""
    said = (
        f"**Size.** {sub.changed_lines} changed lines outside `tests/` "
        "(`git diff --numstat`)"
    )
    if needs_rfc(sub):
        return (
            f"{said}: over the {RFC_LINE_LIMIT} lines above which vLLM asks for "
            "an RFC issue first. The RFC is #____; this PR waits for its "
            "outcome."
        )
    return f"{said}."


def duplicate_check(sub: Submission) -> str:
    standing = sub.standing
    if not sub.about_issue and standing is not None and standing.pull_request:
        search = (
            f"; before opening it, `gh pr list --repo vllm-project/vllm --state "
            f'open --search "{standing.search}"` is run again'
            if standing.search
            else ""
        )
        return (
            f"**Duplicate-work check** (AGENTS.md), last checked "
            f"{standing.checked_on.isoformat()}: {standing.why}{search}."
        )
    if not sub.about_issue:
        return (
            "**Duplicate-work check** (AGENTS.md): the record of related pull "
            f"requests is kept for #{ISSUE}, which this change's commits do not "
            "name; the open pull requests that touch what it changes are "
            "searched by the submitter before it is opened."
        )
    commands = "\n".join(CHECK_COMMANDS)
    lines = [
        f"**Duplicate-work check** (AGENTS.md), last run {CHECKED_ON.isoformat()}:",
        "",
        "```",
        commands,
        "```",
        "",
        *_related_work_lines(sub),
        "",
        EARLIER_FILL_ONLY,
    ]
    return "\n".join(lines)


def _related_work_lines(sub: Submission) -> list[str]:
    """One bullet per related pull request or issue: what it does, a quote,
    and how the series stands to it (fixed by the patches that say `Fixes
    #N`)."""
    lines = []
    for work in RELATED_WORK:
        stands = relation(work, sub.fixes)
        if work.number in sub.fixed_by:
            patches = ", ".join(f"{n}/{sub.count}" for n in sub.fixed_by[work.number])
            stands = f"fixed by commit {patches}"
        lines.append(
            f'- #{work.number} {work.what} ("{work.quote}", {work.source}). '
            f"Here: {stands}."
        )
    return lines


def ai_statement(sub: Submission) -> str:
    said = (
        "This PR was prepared with AI assistance (Claude): code, tests and this "
        "description were drafted with it"
    )
    trailer = (
        "; each commit carries a `Co-authored-by:` trailer" if sub.ai_assisted else ""
    )
    return (
        f"**AI assistance.** {said}{trailer}. I, {sub.submitter.name}, reviewed "
        "every changed line and can answer for the change; the results above "
        "come from the commands shown."
    )


def _name(test: str) -> str:
    """A test's name without its file: ``test_x`` or ``TestY::test_x``."""
    return test.split("::", 1)[-1]


def _facts(submission: Submission) -> dict[str, bool]:
    return {
        "pr_checklist_run": False,  # vLLM's /pr-checklist skill is not run here
        "ai_assisted": submission.ai_assisted,
        "validated": submission.validated,
        "always": True,
        # The test results: the verdict's, or for a part its own runs.
        "has_verdict": submission.verdict is not None
        or (submission.part is not None and submission.evidence is not None),
    }
