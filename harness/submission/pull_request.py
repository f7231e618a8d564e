"""A pull request of the exported commits: the mails (`git format-patch
--cover-letter`), pr-body.md, and what to post before it: the issue a fix
of no reported issue drafts (harness.submission.issue_draft), and the RFC
vLLM asks for above 500 changed lines (harness.submission.discussion).

Written from one Submission (harness.submission.submission): the commits'
subjects, messages and tests, the fail-before-fix runs, a part's
Validation command run on its branch, the wire facts of `BlockStored`, the
cost of the calls the commits change, the verdict (the whole series'), the
comparison with upstream's design where it measured this tree, and how
the change stands upstream. The cover letter and pr-body.md carry the same
sections (harness.submission.pr_body); both name the release the series is
made against (harness.submission.base).
"""

import re
from dataclasses import replace
from datetime import date
from pathlib import Path

from harness import checkout, processes
from harness.errors import ExportError
from harness.log import progress
from harness.series.model import Series
from harness.submission import (
    call_cost,
    discussion,
    issue_draft,
    pr_body,
    pr_template,
    upstream_designs,
    wire_header,
)
from harness.submission.commits import (
    changed_functions,
    changed_lines_outside_tests,
    format_patches,
    validation_tests,
)
from harness.submission.evidence import fail_before_fix, patch_tests, validation_run
from harness.submission.gitrepo import BRANCH, git, message
from harness.submission.related_work import (
    STALE_AFTER_DAYS,
    related_work_age,
    standing,
)
from harness.submission.submission import (
    AI_TRAILER,
    Branch,
    Submission,
    another_series,
)

PR_BODY = "pr-body.md"
ISSUE_DRAFT = issue_draft.ISSUE_DRAFT


def write(
    branch: Branch,
    mails: Path,
    verdict: dict | None,
    verdict_path: Path | None,
    run_fail_before_fix: bool,
    measure_calls: call_cost.Measurer | None,
) -> tuple[Submission, dict[str, str], list[str], list[str]]:
    """Write the mails into ``mails``; the Submission, the texts to write
    beside them (name -> text), warnings, and what is left to the
    submitter."""
    target, repo = branch.target, branch.repo
    release = target.source.release_name()
    progress(f"measuring BlockStored on the wire with {release}'s kv_events.py")
    wire = wire_header.measure(branch.pristine, release)
    commits = list(branch.commits)
    selection = target.selection((verdict or {}).get("selection", "ci"))
    tests = validation_tests(repo, selection, commits, branch.part is not None)
    measured = run_fail_before_fix and measure_calls is not None
    submission = replace(
        _submission(branch, run_fail_before_fix),
        verdict=verdict,
        verdict_path=verdict_path,
        part=branch.part,
        validation_tests=tests,
        validation=validation_run(repo, tests, len(commits))
        if run_fail_before_fix and branch.part is not None
        else None,
        wire=wire,
        cost=call_cost.measure(
            measure_calls,
            changed_functions(repo, branch.start, BRANCH),
            {release: branch.pristine, "this branch": repo},
            repo.parent,
            release,
        )
        if measured
        else None,
        changed_lines=changed_lines_outside_tests(repo, branch.start, BRANCH),
        changed_lines_per_commit=tuple(
            changed_lines_outside_tests(repo, f"{commit}~1", commit)
            for commit in commits
        ),
        named=branch.named,
        standing=_standing(branch),
    )
    upstream, left_out = measured_comparison(
        target.name, branch.series, branch.part is None
    )
    submission = replace(submission, upstream=upstream)
    warnings = submission_warnings(submission) + left_out
    progress(f"writing the mails and {PR_BODY}")
    format_patches(
        repo, branch.base, branch.start, mails, branch.submitter, branch.named
    )
    fill_cover_letter(
        mails / "0000-cover-letter.patch", submission.title, cover_letter(submission)
    )
    template, template_source = pr_template.read_template(repo)
    body, left = pr_body.render(template, submission)
    texts = {PR_BODY: body}
    if submission.needs_issue:
        texts[ISSUE_DRAFT] = issue_draft.render(submission, issue_draft.sections(repo))
        left.insert(0, issue_draft.LEFT)
    if pr_body.needs_rfc(submission):
        sections = discussion.rfc_sections(repo)
        texts[discussion.RFC_ISSUE] = discussion.rfc_issue(submission, sections)
    progress(f"{PR_BODY} follows {template_source}")
    return submission, texts, warnings, left


def _standing(branch: Branch):
    """The recorded standing shared by the branch's patches, if any."""
    found = {standing(patch) for patch in branch.patches}
    return found.pop() if len(found) == 1 else None


def _subject(repo: Path, commit: str) -> str:
    return git(repo, "log", "-1", "--format=%s", commit).strip()


def _submission(branch: Branch, run_fail_before_fix: bool) -> Submission:
    repo, commits = branch.repo, list(branch.commits)
    subjects = [_subject(repo, commit) for commit in commits]
    evidence = fail_before_fix(repo, commits, subjects) if run_fail_before_fix else None
    return Submission(
        target=branch.target,
        tier=branch.tier,
        submitter=branch.submitter,
        subjects=tuple(subjects),
        messages=tuple(message(repo, commit) for commit in commits),
        tests=tuple(patch_tests(repo, commit) for commit in commits),
        evidence=tuple(evidence) if evidence is not None else None,
    )


def submission_warnings(sub: Submission) -> list[str]:
    """What upstream asks for that the series or its evidence does not show."""
    warnings = [
        f"patch {number}/{sub.count} has no Co-authored-by:/Assisted-by: trailer; "
        f"vLLM asks AI-assisted commits to carry one"
        for number, text in enumerate(sub.messages, 1)
        if not AI_TRAILER.search(text)
    ]
    if pr_body.needs_rfc(sub):
        warnings.append(
            f"the export changes {sub.changed_lines} lines outside tests/; vLLM "
            f"asks for an RFC issue first above {pr_body.RFC_LINE_LIMIT}: post "
            f"{discussion.RFC_ISSUE} first, then link it in {PR_BODY}"
        )
    if sub.verdict_gaps:
        warnings.append(
            f"the verdict {sub.verdict_path} has no outcome for "
            f"{sub.verdict_gaps[0]} (and {len(sub.verdict_gaps) - 1} more tests "
            f"the series adds): it was made for another revision of the series"
        )
    warnings += [
        f"fail-before-fix: patch {item.number}/{sub.count} {item.finding()}"
        for item in sub.evidence or ()
        if not item.ok
    ]
    if sub.validation is not None and not sub.validation.passed:
        warnings.append(
            "the Validation command did not pass on the branch: "
            f"{sub.validation.summary or 'no summary'}"
        )
    age = related_work_age(date.today())
    if age > STALE_AFTER_DAYS:
        warnings.append(
            f"the related-work record (harness/submission/related_work.py) was "
            f"checked {age} days ago; re-run its duplicate-work checks"
        )
    return warnings


def measured_comparison(
    target: str, series: Series, whole: bool
) -> tuple[dict | None, list[str]]:
    """The comparison with upstream's design, where it measured the tree this
    export makes: the tier's whole series, at a revision whose series file
    and patches are this checkout's. Otherwise it is left out of every text
    (None), with a warning where it was measured at another revision."""
    upstream = upstream_designs.load(target)
    if upstream is None or not whole:
        return None, []
    revision = str(upstream.get("revision", ""))
    commit = revision.removesuffix("-dirty")
    if not re.fullmatch(r"[0-9a-f]{7,40}", commit):
        other = "which names no commit"
    elif not (other := another_series(revision, series)):
        inputs = ["git", "diff", "--quiet", commit, "--", *upstream_designs.INPUTS]
        if not processes.run(inputs, cwd=checkout.root()).returncode:
            return upstream, []
        other = (
            "whose benchmark, upstream's design or stream checker differ from "
            "this checkout's"
        )
    return None, [
        f"{upstream_designs.RESULTS} was measured at {revision}, {other}: the "
        "comparison with upstream's design is left out; rerun "
        "benchmarks/upstream_designs.py (docs/upstream-designs.md) to quote it"
    ]


def cover_letter(submission: Submission) -> str:
    """The cover letter's text: the pull-request description's sections, and
    how the mails apply."""
    parts = [
        f"## {heading.title()}\n\n{content.strip()}"
        for heading, content in pr_body.sections(submission, set()).items()
    ]
    named = submission.named
    pinned = (
        "; `base-commit:` below names that commit"
        if named is not None and named.full
        else ""
    )
    parts.append(
        "The patches apply with `git am --keep-non-patch` (plain `git am` drops "
        f"the bracketed tags from the subjects) to {submission.base_name}, "
        f"{submission.target.source.release_name()} as released "
        f"({submission.target.source.describe()}){pinned}."
    )
    return "\n\n".join(parts)


def fill_cover_letter(letter: Path, subject: str, blurb: str) -> None:
    text = letter.read_text()
    for placeholder in ("*** SUBJECT HERE ***", "*** BLURB HERE ***"):
        if text.count(placeholder) != 1:
            raise ExportError(
                f"{letter.name} from git format-patch does not hold {placeholder} "
                f"exactly once; cannot fill it"
            )
    text = text.replace("*** SUBJECT HERE ***", subject)
    letter.write_text(text.replace("*** BLURB HERE ***", blurb))
