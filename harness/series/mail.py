"""The series as mails for upstream submission (the `export` verb).

The pristine tree is committed into a scratch git repository ("vLLM X
pristine", with a fixed identity and date so that its id is the same on every
machine), each patch of the tier is applied as a commit with
`git am --keep-non-patch` (plain `git am` would strip the upstream tags such as
[Bugfix][KV Events] from the subjects), and `git format-patch --cover-letter
--base=<that commit>` writes the mails. The cover letter is filled in: the
series title, the problem, one line per patch, the evidence from the latest
verdict (harness.series.letter), the AI-assistance disclosure and a DCO note.

The output directory appears complete or not at all: the mails are written
next to it and renamed into place.
"""

import os
import re
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

from harness.errors import ExportError
from harness.log import progress
from harness.series.letter import (
    SERIES_TITLE,
    cover_blurb,
    fill_cover_letter,
    gather_evidence,
)
from harness.series.model import Series, load_series
from harness.targets import Target
from harness.trees.sources import pristine_tree

# A fixed identity and date for the scratch commits, so that the pristine
# base commit (and with it `base-commit:`) is the same wherever it is made.
EXPORT_IDENTITY = ("vllm-kv-series export", "export@localhost")
BASE_COMMIT_DATE = "2000-01-01T00:00:00+0000"
SIGNED_OFF = re.compile(r"^Signed-off-by: .+ <[^>]+@[^>]+>\s*$", re.MULTILINE)
AI_TRAILER = re.compile(
    r"^(Co-authored-by|Assisted-by|Generated-by): .+$", re.MULTILINE | re.IGNORECASE
)
# vLLM asks for an RFC issue before changes over this many lines (tests,
# kernels, data and config excluded).
RFC_LINE_LIMIT = 500


def git(repo: Path, *args: str, env: dict | None = None) -> str:
    """Run git in repo with the user's configuration left out; return stdout."""
    name, email = EXPORT_IDENTITY
    isolated = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CEILING_DIRECTORIES": str(repo.resolve().parent),
        **(env or {}),
    }
    command = ["git", "-c", f"user.name={name}", "-c", f"user.email={email}"]
    result = subprocess.run(
        [*command, *args], cwd=repo, env=isolated, capture_output=True, text=True
    )
    if result.returncode != 0:
        said = [
            line
            for line in (result.stderr or result.stdout).splitlines()
            if line.strip() and not line.startswith("hint:")
        ]
        detail = "\n".join(said) or "no output"
        raise ExportError(
            f"git {args[0]} failed in {repo}:\n{textwrap.indent(detail, '    ')}"
        )
    return result.stdout


def commit_pristine(target: Target, repo: Path) -> str:
    """Copy the pristine tree into repo and commit it; return the commit id."""
    pristine = pristine_tree(target)
    progress(f"copying the pristine tree of {target.name} ({pristine})")
    shutil.copytree(
        pristine, repo, symlinks=True, ignore=shutil.ignore_patterns(".git")
    )
    git(repo, "init", "--quiet", "--initial-branch=series")
    # --force: the tree's own .gitignore must not keep files out of the base.
    git(repo, "add", "--all", "--force", ".")
    fixed_date = {
        "GIT_AUTHOR_DATE": BASE_COMMIT_DATE,
        "GIT_COMMITTER_DATE": BASE_COMMIT_DATE,
    }
    message = (
        f"{target.source.release_name()} pristine\n\n"
        f"Unpacked from {target.source.describe()}.\n"
    )
    git(repo, "commit", "--quiet", "--no-verify", "-m", message, env=fixed_date)
    return git(repo, "rev-parse", "HEAD").strip()


def apply_as_commits(repo: Path, series: Series) -> list[str]:
    """`git am --keep-non-patch` every patch of the series; return the commits."""
    commits = []
    for number, entry in enumerate(series.entries, 1):
        progress(f"git am [{number}/{len(series.entries)}] {entry.patch}")
        try:
            git(
                repo,
                "am",
                "--quiet",
                "--keep-non-patch",
                "--committer-date-is-author-date",
                f"-p{entry.strip}",
                str(series.patch_path(entry).resolve()),
            )
        except ExportError as exc:
            raise ExportError(
                f"patch {entry.patch} from {series.series_file} does not go in "
                f"with git am --keep-non-patch: {exc}"
            ) from None
        commit = git(repo, "rev-parse", "HEAD").strip()
        message = git(repo, "log", "-1", "--format=%B", commit)
        if not SIGNED_OFF.search(message):
            raise ExportError(
                f"patch {entry.patch} has no 'Signed-off-by: Name <email>' line; "
                f"upstream requires a DCO sign-off on every commit"
            )
        commits.append(commit)
    return commits


def patch_subjects(repo: Path, commits: list[str]) -> list[str]:
    return [git(repo, "log", "-1", "--format=%s", commit).strip() for commit in commits]


def changed_lines_outside_tests(repo: Path, base: str) -> int:
    total = 0
    for line in git(repo, "diff", "--numstat", base, "HEAD").splitlines():
        added, removed, path = line.split("\t", 2)
        if not path.startswith("tests/") and added != "-":
            total += int(added) + int(removed)
    return total


def export_series(
    target: Target, tier: str, out: Path, verdict_path: Path | None = None
) -> tuple[list[Path], list[str]]:
    """Write the mails to out (which must not exist); return them and warnings."""
    if out.exists():
        raise ExportError(f"{out} already exists; remove it or choose another")
    series = load_series(target, tier)
    if not series.entries:
        raise ExportError(f"{series.series_file} lists no patches; nothing to export")
    evidence, warnings = gather_evidence(target, tier, series, verdict_path)
    default = {entry.patch for entry in load_series(target, "default").entries}
    optional = {
        number
        for number, entry in enumerate(series.entries, 1)
        if entry.patch not in default
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="harness-export-") as scratch:
        repo = Path(scratch) / "vllm"
        base = commit_pristine(target, repo)
        commits = apply_as_commits(repo, series)
        warnings += submission_warnings(repo, base, series, commits)
        blurb = cover_blurb(
            target, tier, patch_subjects(repo, commits), optional, evidence
        )
        with tempfile.TemporaryDirectory(
            dir=out.parent, prefix=f".{out.name}-"
        ) as work:
            mails = Path(work) / "mails"
            format_patches(repo, base, commits[0], mails)
            fill_cover_letter(mails / "0000-cover-letter.patch", SERIES_TITLE, blurb)
            mails.rename(out)
    return sorted(out.iterdir()), warnings


def submission_warnings(
    repo: Path, base: str, series: Series, commits: list[str]
) -> list[str]:
    """What upstream asks for that the series does not do yet."""
    warnings = []
    for entry, commit in zip(series.entries, commits, strict=True):
        if not AI_TRAILER.search(git(repo, "log", "-1", "--format=%B", commit)):
            warnings.append(
                f"{entry.patch} has no Co-authored-by:/Assisted-by: trailer; "
                f"vLLM asks AI-assisted commits to carry one"
            )
    lines = changed_lines_outside_tests(repo, base)
    if lines > RFC_LINE_LIMIT:
        warnings.append(
            f"the series changes {lines} lines outside tests/; vLLM asks for an "
            f"RFC issue first above {RFC_LINE_LIMIT}"
        )
    return warnings


def format_patches(repo: Path, base: str, first: str, mails: Path) -> None:
    # The cover letter is from the series' author, like its patches.
    name, email = git(repo, "log", "-1", "--format=%an%n%ae", first).splitlines()
    git(
        repo,
        "format-patch",
        "--quiet",
        "--cover-letter",
        f"--base={base}",
        "--subject-prefix=PATCH",
        "-o",
        str(mails),
        f"{base}..HEAD",
        env={"GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email},
    )
