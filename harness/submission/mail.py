"""The series as mails and a pull-request body for upstream submission (the
`export` verb).

The pristine tree is committed into a scratch git repository ("vLLM X
pristine", with a fixed identity and date so that its id is the same on every
machine; harness.submission.gitrepo, harness.submission.commits), and each patch of
the tier is applied as a
commit with `git am --keep-non-patch` (plain `git am` would strip the
upstream tags such as [Bugfix][KV Events] from the subjects), then made the
submitter's: their authorship and sign-off (harness.submission.submitter). Each
patch's tests are run without and with its fix (harness.submission.evidence).
`git format-patch --cover-letter --base=<that commit>` writes the mails; the
cover letter and pr-body.md carry the same text (harness.submission.pr_body),
written from the same facts (harness.submission.submission).

Everything is checked before any work: the output directory can be made
and lies outside the harness cache and the pristine tree, the series reads,
the range of patches asked for is in it, the verdict is one, and (for the
fail-before-fix runs) pytest and the tree's test requirements are installed
(harness.submission.evidence_env). A part of the series (`--patches`) is
committed straight onto the pristine tree (a single patch, or `--alone`) or
on top of the patches before it, whose mails it then names as
prerequisites; its texts quote only what was measured on its own branch
(harness.submission.pr_part), never the tier's verdict or the comparison with
upstream's design, which are quoted only where they measured this tree.
The output directory appears complete
or not at all: it is staged next to itself and renamed into place. The
scratch repository (a copy of the pristine tree) and the staging directory
are harness.scratch directories: removed on an error or a stop signal, and
swept by the next export when a SIGKILL left them.
"""

import re
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path

from harness import cache, checkout, processes, scratch
from harness.errors import ExportError, OutputError
from harness.log import progress
from harness.series.model import Series, load_series
from harness.submission import (
    call_cost,
    discussion,
    pr_body,
    pr_template,
    upstream_designs,
    wire_header,
)
from harness.submission.commits import (
    apply_as_commits,
    changed_lines_outside_tests,
    commit_pristine,
    format_patches,
    validation_tests,
)
from harness.submission.discussion import issue_comment
from harness.submission.evidence import fail_before_fix, patch_tests
from harness.submission.evidence_env import require_pytest, require_test_environment
from harness.submission.gitrepo import BRANCH, git, message
from harness.submission.related_work import STALE_AFTER_DAYS, related_work_age
from harness.submission.submission import (
    AI_TRAILER,
    Submission,
    another_series,
    find_verdict,
    patch_range,
    series_part,
)
from harness.submission.submitter import Identity
from harness.targets import Target
from harness.trees.sources import pristine_tree

PR_BODY = "pr-body.md"
# The purpose its scratch directories are named after (harness.scratch).
SCRATCH = "export"


@dataclass
class Export:
    """What an export wrote, and what it leaves to the submitter."""

    files: list[Path]
    submission: Submission
    warnings: list[str] = field(default_factory=list)
    left_to_submitter: list[str] = field(default_factory=list)

    @property
    def rfc(self) -> bool:
        return any(path.name == discussion.RFC_ISSUE for path in self.files)


def export_series(
    target: Target,
    tier: str,
    out: Path,
    submitter: Identity,
    verdict_path: Path | None = None,
    run_fail_before_fix: bool = True,
    patches: tuple[int, int | None] | None = None,
    alone: bool | None = None,
    measure_calls: call_cost.Measure | None = None,
) -> Export:
    """Write the mails, pr-body.md and the texts to post before it
    (harness.submission.discussion) to out, which must not exist. ``patches``
    (first, last; 1-based, last None for the end) exports that part of the
    tier's series: ``alone``, committed straight onto the pristine tree,
    else on top of the patches before it (None: alone for a single patch).
    ``measure_calls`` measures the calls' cost in one tree
    (harness.submission.call_cost); it runs only with the fail-before-fix
    runs, whose environment imports the tree's vLLM."""
    out = checked_out(out)
    release = target.source.release_name()
    if run_fail_before_fix:
        require_pytest(target.name, release)
    series = load_series(target, tier)
    if not series.entries:
        raise ExportError(f"{series.series_file} lists no patches; nothing to export")
    first, last = patch_range(patches, series)
    alone = first == last if alone is None else alone
    part = series_part(first, last, series, alone)
    verdict, verdict_path, warnings = find_verdict(target, tier, series, verdict_path)
    if part is not None:
        # The verdict measured the whole series' tree, not this branch's.
        verdict, verdict_path, warnings = None, None, []
    pristine = pristine_tree(target)
    refuse_inside(out, pristine, f"the pristine tree of target {target.name}")
    if run_fail_before_fix:
        require_test_environment(pristine, target.name, release)
    progress(f"measuring BlockStored on the wire with {release}'s kv_events.py")
    wire = wire_header.measure(pristine, release)
    with ExitStack() as stack:
        stage = _stage_next_to(out, stack)
        repo = _scratch_tree(stack)
        base = commit_pristine(target, pristine, repo)
        skipped = first - 1 if alone else 0
        commits = apply_as_commits(repo, series, submitter, last, skipped)
        start = base if alone or first == 1 else commits[first - 2]
        ours = commits[first - 1 - skipped :]
        submission = replace(
            _submission(target, tier, submitter, repo, ours, run_fail_before_fix),
            verdict=verdict,
            verdict_path=verdict_path,
            part=part,
            validation_tests=validation_tests(
                repo, target.selection((verdict or {}).get("selection", "ci")), ours
            ),
            wire=wire,
            cost=call_cost.measure(measure_calls, pristine, repo, repo.parent, release)
            if measure_calls is not None and run_fail_before_fix
            else None,
            changed_lines=changed_lines_outside_tests(repo, start, BRANCH),
            changed_lines_per_commit=tuple(
                changed_lines_outside_tests(repo, f"{commit}~1", commit)
                for commit in ours
            ),
        )
        upstream, left_out = measured_comparison(target.name, series, part is None)
        submission = replace(submission, upstream=upstream)
        warnings += submission_warnings(submission)
        warnings += left_out
        mails = stage / out.name
        progress(f"writing the mails and {PR_BODY}")
        format_patches(repo, base, start, mails, submitter)
        fill_cover_letter(
            mails / "0000-cover-letter.patch",
            submission.title,
            cover_letter(submission),
        )
        template, template_source = pr_template.read_template(repo)
        body, left = pr_body.render(template, submission)
        texts = {PR_BODY: body}
        if submission.about_issue:
            texts[discussion.ISSUE_COMMENT] = issue_comment(submission)
        if pr_body.needs_rfc(submission):
            sections = discussion.rfc_sections(repo)
            texts[discussion.RFC_ISSUE] = discussion.rfc_issue(submission, sections)
        try:
            for name, text in texts.items():
                (mails / name).write_text(text)
            mails.rename(out)
        except OSError as exc:
            raise OutputError(f"cannot write {out}: {exc.strerror or exc}") from None
    progress(f"{PR_BODY} follows {template_source}")
    return Export(sorted(out.iterdir()), submission, warnings, left)


def checked_out(out: Path) -> Path:
    """``out`` as an absolute path (git runs in the scratch repository, so a
    relative one would land there), refused with one line where it exists,
    cannot be made (`scratch.new_path`: under a file, a name too long, a
    removed working directory) or lies inside the harness cache, whose
    trees nothing writes into."""
    out = scratch.new_path(out, "--out")
    refuse_inside(out, cache.root(), "the harness cache")
    return out


def refuse_inside(out: Path, directory: Path, what: str) -> None:
    """One line where ``out`` lies inside ``directory``, through links or in
    one of its directories under another name (a bind mount:
    `cache.lies_in`)."""
    if cache.lies_in(out, directory):
        raise OutputError(
            f"--out {out} lies inside {what} ({directory}), which the harness "
            "reads and never writes into; choose a directory outside it"
        )


def _subject(repo: Path, commit: str) -> str:
    return git(repo, "log", "-1", "--format=%s", commit).strip()


def _stage_next_to(out: Path, stack: ExitStack) -> Path:
    """A scratch directory next to out (so that out appears by a rename), made
    first: an unwritable place fails before any work."""
    if out.parent.exists() and not out.parent.is_dir():
        raise OutputError(f"cannot write the export in {out.parent}: not a directory")
    try:
        stack.enter_context(scratch.folders(out.parent))
        return stack.enter_context(scratch.directory(out.parent, SCRATCH))
    except OSError as exc:
        raise OutputError(
            f"cannot write the export next to {out}: {exc.strerror or exc}"
        ) from None


def _scratch_tree(stack: ExitStack) -> Path:
    """Where the scratch repository goes: a new directory of the temporary
    directory ($TMPDIR)."""
    try:
        parent = Path(tempfile.gettempdir())
        return stack.enter_context(scratch.directory(parent, SCRATCH)) / "vllm"
    except OSError as exc:
        raise OutputError(
            f"cannot make a scratch directory in {tempfile.gettempdir()}: "
            f"{exc.strerror or exc}; point TMPDIR at a writable directory"
        ) from None


def _submission(
    target: Target,
    tier: str,
    submitter: Identity,
    repo: Path,
    commits: list[str],
    run_fail_before_fix: bool,
) -> Submission:
    subjects = [_subject(repo, commit) for commit in commits]
    evidence = fail_before_fix(repo, commits, subjects) if run_fail_before_fix else None
    return Submission(
        target=target,
        tier=tier,
        submitter=submitter,
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
    age = related_work_age(date.today())
    if age > STALE_AFTER_DAYS:
        warnings.append(
            f"the related-work record (harness/submission/submission.py) was checked "
            f"{age} days ago; re-run its duplicate-work checks"
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
    parts.append(
        "The patches apply with `git am --keep-non-patch` (plain `git am` drops "
        "the bracketed tags from the subjects). The base-commit below is "
        f"{submission.target.source.release_name()} as unpacked from "
        f"{submission.target.source.describe()}, committed with a fixed identity "
        "and date."
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
