"""Which vLLM a git checkout holds, for `apply --onto`, and git on that checkout.

The version is the nearest `v*` tag before HEAD, else `vllm/_version.py`,
else `PKG-INFO`. A checkout of another release than the target's is
refused, naming the one found; an unknown one is a warning. So is one that
already carries commits of the series (`refuse_series_commits`: a
``--commit`` run killed midway leaves some), or is in the middle of a
``git am``: the line names them and how to go back, where the series'
first patch would otherwise be blamed for not applying. git runs on the
checkout itself, whatever GIT_DIR and the like say.
"""

import os
import re
from pathlib import Path

from harness import processes
from harness.errors import SeriesError
from harness.log import progress, warning
from harness.reading import Refused, read_bounded
from harness.series.snapshot import ORIGINAL
from harness.targets import GitSource, SdistSource, Target
from harness.trees.git_release import REPOSITORY_VARIABLES

_VERSION_ASSIGNMENT = re.compile(
    r"^__version__\s*=\s*(?:version\s*=\s*)?['\"]([^'\"]+)['\"]", re.MULTILINE
)


def checkout_version(checkout: Path) -> tuple[str, str] | None:
    """(version, how it was found) of the vLLM a checkout holds, or None: the
    nearest v* tag before HEAD, else vllm/_version.py, else PKG-INFO."""
    tag = (
        git(checkout, "describe", "--tags", "--abbrev=0", "--match", "v[0-9]*") or ""
    ).strip()
    if tag:
        since = (git(checkout, "rev-list", "--count", f"{tag}..HEAD") or "0").strip()
        after = f", {since} commit(s) after it" if since != "0" else ""
        return tag.removeprefix("v"), f"tag {tag}{after}"
    version_file = _text_of(checkout / "vllm" / "_version.py")
    if match := _VERSION_ASSIGNMENT.search(version_file):
        return match[1], "vllm/_version.py"
    if match := re.search(r"^Version: (\S+)", _text_of(checkout / "PKG-INFO"), re.M):
        return match[1], "PKG-INFO"
    return None


# The most of a checkout's version file that is read: a few hundred bytes.
VERSION_FILE_MAX_BYTES = 1 << 20


def _text_of(path: Path) -> str:
    """The text of a checkout's version file, "" where there is none that is
    a regular file of at most VERSION_FILE_MAX_BYTES (harness.reading)."""
    try:
        data = read_bounded(path, VERSION_FILE_MAX_BYTES, what="version file")
    except (OSError, Refused):
        return ""
    return data.decode("utf-8", "replace")


def check_checkout_version(target: Target, checkout: Path) -> None:
    """Refuse a checkout of another vLLM than the target's, naming the one
    found; an unknown version is a warning (the apply restores on failure)."""
    if isinstance(target.source, GitSource):
        _check_descends(target, target.source, checkout)
    elif isinstance(target.source, SdistSource):
        _check_release(target, target.source, checkout)


def _check_descends(target: Target, source: GitSource, checkout: Path) -> None:
    ancestry = ("merge-base", "--is-ancestor", source.commit, "HEAD")
    result = git_run(checkout, *ancestry)
    if result.returncode == 1:
        raise SeriesError(
            f"{checkout}: HEAD does not descend from commit {source.commit}, the "
            f"source of target {target.name}; check out a branch based on it"
        )
    if result.returncode != 0:
        warning(
            f"cannot tell whether {checkout} holds commit {source.commit} of target "
            f"{target.name} (not in this repository); applying anyway"
        )


def _check_release(target: Target, source: SdistSource, checkout: Path) -> None:
    found = checkout_version(checkout)
    if found is None:
        warning(
            f"cannot tell which vLLM {checkout} is (no v* tag before HEAD, no "
            f"vllm/_version.py, no PKG-INFO); applying the series of vLLM "
            f"{source.version} anyway"
        )
        return
    version, how = found
    if version != source.version:
        raise SeriesError(
            f"{checkout} is vLLM {version} ({how}), but target {target.name} is "
            f"vLLM {source.version}; check out v{source.version}, or use the target "
            f"of {version} if there is one (python -m harness targets)"
        )
    progress(f"{checkout} is vLLM {version} ({how})")


def git_run(checkout: Path, *args: str):
    """git on the checkout itself, whatever GIT_DIR and the like say (and,
    as every child, with no optional lock: harness.processes)."""
    env = {k: v for k, v in os.environ.items() if k not in REPOSITORY_VARIABLES}
    return processes.run(["git", "-C", str(checkout), *args], env=env)


def git(checkout: Path, *args: str) -> str | None:
    result = git_run(checkout, *args)
    return result.stdout if result.returncode == 0 else None


# How far back from HEAD `series_commits` looks for the series' own commits.
SCAN_COMMITS = 1000


def series_commits(checkout: Path, series) -> list[tuple[str, str]]:
    """The commits among HEAD's last `SCAN_COMMITS` that are patches of the
    series as ``git am`` commits them (the patch's author, address and
    subject), oldest first: (commit, patch)."""
    wanted = {}
    for entry in series.entries:
        mail = series.patch_path(entry).read_bytes().decode("utf-8", "surrogateescape")
        info = processes.run(
            ["git", "mailinfo", "-b", os.devnull, os.devnull], input=mail
        )
        fields = dict(
            line.split(": ", 1) for line in info.stdout.splitlines() if ": " in line
        )
        key = tuple(fields.get(name, "") for name in ("Author", "Email", "Subject"))
        wanted[key] = entry.patch
    shape = "--format=%H%x00%an%x00%ae%x00%s"
    log = git(checkout, "log", f"-n{SCAN_COMMITS}", shape, "HEAD") or ""
    found = []
    for line in log.splitlines():
        commit, *key = line.split("\0")
        if (patch := wanted.get(tuple(key))) is not None:
            found.append((commit, patch))
    return found[::-1]


def refuse_series_commits(checkout: Path, series, tier: str) -> None:
    """Refuse a checkout that already carries commits of the series (an
    earlier ``--commit`` run that was killed, or one applied by hand), or
    that is in the middle of a ``git am``, saying what was found and how to
    go back; the series would not apply over them, and the line would blame
    its first patch."""
    in_progress = git(checkout, "rev-parse", "--git-path", "rebase-apply")
    if in_progress and (checkout / in_progress.strip()).exists():
        raise SeriesError(
            f"{checkout} is in the middle of a git am or rebase "
            f"({in_progress.strip()} exists: an earlier run that was killed?); "
            f"end it first: `git am --abort` (or `git rebase --abort`)"
        )
    found = series_commits(checkout, series)
    if not found:
        return
    total = len(series.entries)
    named = ", ".join(f"{patch} as {commit[:12]}" for commit, patch in found[:3])
    oldest = found[0][0]
    parent = (git(checkout, "rev-parse", "--verify", f"{oldest}^") or "").strip()
    back = (
        f"`git reset --hard {parent[:12]}` goes back to before them (dropping "
        f"them and whatever was committed after them)"
        if parent
        else "they start its history"
    )
    raise SeriesError(
        f"{checkout} already carries {len(found)} of the {total} commit(s) of "
        f"tier {tier}'s series ({named}): from an earlier --commit run that "
        f"was killed, or applied before; {back}, then apply again"
    )


def refuse_uncommitted(checkout: Path) -> None:
    """Refuse a checkout with uncommitted changes, naming the first few; one
    that holds originals an `apply --onto` set aside (killed while it wrote
    the patched files: `snapshot.ORIGINAL`) says how to put them back."""
    status = git(checkout, "status", "--porcelain", "--untracked-files=all")
    if not status:
        return
    lines = status.splitlines()
    originals = [line[3:] for line in lines if ORIGINAL in line]
    note = (
        f"; {len(originals)} {ORIGINAL}* file(s) among them ({originals[0]}) are "
        f"originals an apply --onto set aside and was killed before putting "
        f"back: each is the file beside it as it was before; move each back "
        f"over that file, and remove the files the series added"
        if originals
        else ""
    )
    raise SeriesError(
        f"{checkout} has uncommitted changes ({'; '.join(lines[:3])}); commit or "
        f"stash them first{note}"
    )
