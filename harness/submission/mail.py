"""The series as upstream takes it (the `export` verb): a pull request of a
change no open pull request does, or a comment for the open pull request
of a change that duplicates or competes with one.

Which it is comes from the related-work record
(harness.submission.related_work's standings, by patch): the patches of a
range must stand alike, or the export is refused in one line naming how
each stands. The pristine tree is committed into a scratch git repository
("vLLM X pristine", with a fixed identity and date;
harness.submission.gitrepo, harness.submission.commits), and each patch of
the tier is applied as a commit with `git am --keep-non-patch` (plain `git
am` would strip the upstream tags such as [Bugfix][KV Events] from the
subjects), then made the submitter's (harness.submission.submitter). A pull
request then gets its mails, description and the texts to post before it
(harness.submission.pull_request); a comment its measurements beside the
upstream design's tree (harness.submission.comment_export).

Everything is checked before any work: the output directory can be made
and lies outside the harness cache and the pristine tree, the series reads,
the range of patches asked for is in it and stands alike upstream, the
verdict is one, and (for the fail-before-fix runs and the measurements)
pytest and the tree's test requirements are installed
(harness.submission.evidence_env). A part of the series (`--patches`) is
committed straight onto the pristine tree (a single patch, or `--alone`) or
on top of the patches before it. The output directory appears complete
or not at all: it is staged next to itself and renamed into place. The
scratch repository (a copy of the pristine tree) and the staging directory
are harness.scratch directories: removed on an error or a stop signal, and
swept by the next export when a SIGKILL left them.
"""

import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from harness import cache, scratch
from harness.errors import ExportError, OutputError
from harness.series.model import load_series
from harness.submission import comment_export, discussion, pull_request
from harness.submission.base import release_base
from harness.submission.call_cost import Measurer
from harness.submission.commits import apply_as_commits, commit_pristine
from harness.submission.evidence_env import require_pytest, require_test_environment
from harness.submission.related_work import Standing, choose
from harness.submission.submission import (
    Branch,
    Submission,
    find_verdict,
    patch_range,
    series_part,
)
from harness.submission.submitter import Identity
from harness.targets import Target
from harness.trees.sources import pristine_tree

PR_BODY = pull_request.PR_BODY
# The purpose its scratch directories are named after (harness.scratch).
SCRATCH = "export"


@dataclass
class Export:
    """What an export wrote, and what it leaves to the submitter: a pull
    request (``submission``), or comments for an open one (``standing``)."""

    files: list[Path]
    submission: Submission | None
    warnings: list[str] = field(default_factory=list)
    left_to_submitter: list[str] = field(default_factory=list)
    standing: Standing | None = None  # a comment's: the pull request it is for

    @property
    def rfc(self) -> bool:
        return any(path.name == discussion.RFC_ISSUE for path in self.files)

    @property
    def issue_draft(self) -> bool:
        return any(path.name == pull_request.ISSUE_DRAFT for path in self.files)


def export_series(
    target: Target,
    tier: str,
    out: Path,
    submitter: Identity,
    verdict_path: Path | None = None,
    run_fail_before_fix: bool = True,
    patches: tuple[int, int | None] | None = None,
    alone: bool | None = None,
    measure_calls: Measurer | None = None,
    measure_designs: comment_export.MeasureDesigns | None = None,
) -> Export:
    """Write a pull request's files, or the comments for an open one, to
    out, which must not exist. ``patches`` (first, last; 1-based, last None
    for the end) exports that part of the tier's series: ``alone``,
    committed straight onto the pristine tree, else on top of the patches
    before it (None: alone for a single patch). ``measure_calls`` measures
    the cost of the calls a change alters (harness.submission.call_cost),
    ``measure_designs`` a comment's trees side by side; both run only with
    the fail-before-fix runs, whose environment imports the tree's vLLM."""
    out = checked_out(out)
    release = target.source.release_name()
    if run_fail_before_fix:
        require_pytest(target.name, release)
    series = load_series(target, tier)
    if not series.entries:
        raise ExportError(f"{series.series_file} lists no patches; nothing to export")
    first, last = patch_range(patches, series)
    standing = choose(series.series_file.name, series.entries, first, last)
    alone = first == last if alone is None else alone
    part = series_part(first, last, series, alone)
    verdict, verdict_path, warnings = find_verdict(target, tier, series, verdict_path)
    if part is not None or standing is not None:
        # The verdict measured the whole series' tree, not this branch's.
        verdict, verdict_path, warnings = None, None, []
    pristine = pristine_tree(target)
    refuse_inside(out, pristine, f"the pristine tree of target {target.name}")
    if run_fail_before_fix:
        require_test_environment(pristine, target.name, release)
    with ExitStack() as stack:
        stage = _stage_next_to(out, stack)
        repo = _scratch_tree(stack)
        base = commit_pristine(target, pristine, repo)
        skipped = first - 1 if alone else 0
        commits = apply_as_commits(repo, series, submitter, last, skipped)
        branch = Branch(
            target=target,
            tier=tier,
            submitter=submitter,
            repo=repo,
            pristine=pristine,
            base=base,
            start=base if alone or first == 1 else commits[first - 2],
            commits=tuple(commits[first - 1 - skipped :]),
            part=part,
            named=release_base(target, pristine),
            series=series,
            patches=tuple(entry.patch for entry in series.entries[first - 1 : last]),
        )
        written = stage / out.name
        written.mkdir()
        if standing is not None:
            texts, more, left = comment_export.write(
                branch, standing, run_fail_before_fix, measure_calls, measure_designs
            )
            submission = None
        else:
            submission, texts, more, left = pull_request.write(
                branch,
                written,
                verdict,
                verdict_path,
                run_fail_before_fix,
                measure_calls,
            )
        warnings += more
        try:
            for name, text in texts.items():
                (written / name).write_text(text)
            written.rename(out)
        except OSError as exc:
            raise OutputError(f"cannot write {out}: {exc.strerror or exc}") from None
    return Export(sorted(out.iterdir()), submission, warnings, left, standing)


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
