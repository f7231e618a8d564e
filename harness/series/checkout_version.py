"""Which vLLM a git checkout holds, for `apply --onto`, and git on that checkout.

The version is the nearest `v*` tag before HEAD, else `vllm/_version.py`,
else `PKG-INFO`. A checkout of another release than the target's is
refused, naming the one found; an unknown one is a warning. git runs on
the checkout itself, whatever GIT_DIR and the like say.
"""

import os
import re
from pathlib import Path

from harness import processes
from harness.errors import SeriesError
from harness.log import progress, warning
from harness.reading import Refused, read_bounded
from harness.targets import GitSource, SdistSource, Target

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


# Where git would look for a repository other than the checkout --onto names.
REPOSITORY_VARIABLES = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
)


def git_run(checkout: Path, *args: str):
    """git on the checkout itself, whatever GIT_DIR and the like say (and,
    as every child, with no optional lock: harness.processes)."""
    env = {k: v for k, v in os.environ.items() if k not in REPOSITORY_VARIABLES}
    return processes.run(["git", "-C", str(checkout), *args], env=env)


def git(checkout: Path, *args: str) -> str | None:
    result = git_run(checkout, *args)
    return result.stdout if result.returncode == 0 else None
