"""A tier of the series onto a git checkout as one commit per patch.

`apply --onto PATH --commit` runs ``git am --keep-non-patch`` once per patch
of the tier, with the patch's ``-pN``, so that each becomes a commit whose
author, date and message are the patch's own mail headers (the upstream tags
of its subject kept), committed by the checkout's git identity; ``git am``
applies as ``git apply`` does, without fuzz. Before the first patch, what
`apply --onto` checks (the top of a git checkout of the target's release,
nothing uncommitted, no quilt stack) and that git has an identity to commit
with.

A patch that does not apply, one that applies but whose commit git cannot
make (a commit gpg cannot sign, a hook that refuses it: told apart by what
``git am`` left in the index, and named), or a stop signal, ends the
``git am`` session
and moves the branch back to the commit it started from, with stop signals
held; but only when nothing else changed the checkout meanwhile: otherwise
it says which files changed and how to go back, and touches nothing.
"""

import textwrap
from pathlib import Path

from harness import cache, processes
from harness.errors import SeriesError
from harness.log import progress
from harness.processes import stop_signals_held
from harness.series.apply import check_checkout_version
from harness.series.checkout_version import (
    refuse_series_commits,
    refuse_uncommitted,
)
from harness.series.model import Series, load_series
from harness.targets import Target


def _git(checkout: Path, *args: str):
    return processes.run(["git", "-C", str(checkout), *args])


def _output(checkout: Path, *args: str) -> str | None:
    result = _git(checkout, *args)
    return result.stdout.strip() if result.returncode == 0 else None


def _check_checkout(target: Target, checkout: Path, series: Series, tier: str) -> str:
    """What `apply --onto` requires, and an identity; the HEAD commit."""
    top = _output(checkout, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != checkout.resolve():
        raise SeriesError(
            f"{checkout} is not the top of a git checkout; --commit needs one"
        )
    check_checkout_version(target, checkout)
    refuse_series_commits(checkout, series, tier)
    if (checkout / ".pc").exists():
        raise SeriesError(f"{checkout / '.pc'} exists (a quilt stack); pop it first")
    refuse_uncommitted(checkout)
    if _output(checkout, "var", "GIT_COMMITTER_IDENT") is None:
        raise SeriesError(
            f"git has no identity to commit with in {checkout}; set user.name "
            f"and user.email (git config), or apply without --commit"
        )
    head = _output(checkout, "rev-parse", "--verify", "HEAD")
    if head is None:
        raise SeriesError(f"{checkout} has no commit to apply the series onto")
    return head


def commit_onto(target: Target, tier: str, checkout: Path) -> list[str]:
    """One commit per patch onto a clean checkout, all or none; returns the
    new commits' one-line summaries."""
    cache.outside_trees(checkout, "--onto")
    series = load_series(target, tier)
    start = _check_checkout(target, checkout, series, tier)
    try:
        for number, entry in enumerate(series.entries, 1):
            progress(f"committing [{number}/{len(series.entries)}] {entry.patch}")
            patch = str(series.patch_path(entry).resolve())
            am = ["am", "--quiet", "--keep-non-patch", f"-p{entry.strip}", patch]
            result = _git(checkout, *am)
            if result.returncode != 0:
                detail = textwrap.indent(
                    (result.stdout + result.stderr).strip(), "    "
                )
                if _applied_uncommitted(checkout):
                    raise SeriesError(
                        f"patch {entry.patch} from {series.series_file} applies, "
                        f"but git could not commit it: {_commit_cause(checkout)}; "
                        f"{checkout} is back at {start[:12]}:\n{detail}"
                    )
                raise SeriesError(
                    f"patch {entry.patch} from {series.series_file} does not apply "
                    f"(git am, no fuzz); {checkout} is back at {start[:12]}:\n{detail}"
                )
    except BaseException:
        with stop_signals_held():
            _go_back(checkout, start)
        raise
    log = _output(checkout, "log", "--oneline", "--reverse", f"{start}..HEAD")
    progress(f"{len(series.entries)} commit(s) of tier {tier} onto {checkout}")
    return (log or "").splitlines()


def _applied_uncommitted(checkout: Path) -> bool:
    """Whether the ``git am`` that failed left its patch in the index: it
    applied, and the commit is what failed (git am leaves the index as it was
    for a patch that does not apply)."""
    return _git(checkout, "diff", "--cached", "--quiet").returncode == 1


def _commit_cause(checkout: Path) -> str:
    """Why git could not commit a patch that applied, as far as its
    configuration tells."""
    if _output(checkout, "config", "--bool", "commit.gpgsign") == "true":
        return (
            "the checkout's git configuration signs every commit "
            "(commit.gpgsign) and signing failed; make signing work (its key, "
            "its agent), or turn it off for this checkout (git config "
            "commit.gpgsign false), or apply without --commit"
        )
    return (
        "a hook of the checkout (applypatch-msg, pre-applypatch) refused it, or "
        "git could not write the commit; git's output follows"
    )


def _go_back(checkout: Path, start: str) -> None:
    """End the am session and move the branch back to ``start``, unless the
    checkout changed besides."""
    _git(checkout, "am", "--abort")  # fails harmlessly when none is going
    if changes := _output(checkout, "status", "--porcelain"):
        first = "; ".join(changes.splitlines()[:3])
        raise SeriesError(
            f"{checkout} changed while the series was being committed ({first}); "
            f"left as it is: `git reset --hard {start[:12]}` goes back to where it "
            f"was, dropping those changes"
        )
    _git(checkout, "reset", "--quiet", "--hard", start)
