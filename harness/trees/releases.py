"""The vLLM releases on the package index that are newer than every target.

`targets --newer` asks pip, as the harness fetches its sdists (so the user's
index configuration is honoured): `pip index versions` lists the versions
that have an sdist, and each newer one's sdist is downloaded with `pip
download` through the stand-in build backend of harness.trees.sources, so
nothing in the archive runs, into scratch space in the temporary directory
(removed afterwards; the cache holds pinned sdists only, and pip's own cache
keeps the download), to name the sha256 a pin needs.

Final releases only: a pre-release (a, b, rc), a development release or a
local version is left out. A post-release (0.8.5.post1) is a final release,
newer than the one it follows, and is listed. Each pip call is bounded in
time and output; an index that cannot be asked is one line
(IndexUnreachable).
"""

import re
import sys
import tempfile
from pathlib import Path

from harness import cache, processes, scratch
from harness.errors import IndexUnreachable
from harness.log import progress
from harness.targets import SdistSource, Target
from harness.trees.sources import standin_environment

PIP = [sys.executable, "-m", "pip"]
INDEX_TIMEOUT_S = 120.0
DOWNLOAD_TIMEOUT_S = 900.0
MAX_OUTPUT = 1 << 20
# A final release, as pip prints it (normalized): N(.N)*, maybe .postN.
FINAL = re.compile(r"(\d+(?:\.\d+)*)(?:\.post(\d+))?")
_ERROR_LINE = re.compile(r"ERROR: ")


def final_key(version: str) -> tuple | None:
    """A sort key of a final release (trailing zeros dropped, so 1.0 is 1),
    None for anything else."""
    match = FINAL.fullmatch(version)
    if match is None:
        return None
    release = [int(part) for part in match[1].split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    return tuple(release), int(match[2]) if match[2] is not None else -1


def newest_pinned(targets: list[Target], name: str) -> tuple[str, str] | None:
    """(version, target) of the newest final release of ``name`` a target
    pins as its sdist, or None where none does."""
    pinned = [
        (final_key(t.source.version), t.source.version, t.name)
        for t in targets
        if isinstance(t.source, SdistSource) and t.source.name == name
    ]
    pinned = [entry for entry in pinned if entry[0] is not None]
    if not pinned:
        return None
    _, version, target = max(pinned)
    return version, target


def newer_releases(name: str, than: str) -> list[tuple[str, str]]:
    """(version, sdist sha256) of every final release of ``name`` on the
    index newer than ``than``, oldest first."""
    floor = final_key(than)
    newer = [v for v in index_versions(name) if (key := final_key(v)) and key > floor]
    newer.sort(key=final_key)
    return [(version, sdist_sha256(name, version)) for version in newer]


def index_versions(name: str) -> list[str]:
    """The versions of ``name`` with an sdist, as `pip index versions` lists them."""
    command = ["index", "versions", "--no-binary", ":all:", "--ignore-requires-python"]
    result = _pip([*command, name], INDEX_TIMEOUT_S, f"list the versions of {name}")
    for line in result.stdout.splitlines():
        if line.startswith("Available versions:"):
            listed = line.split(":", 1)[1]
            return [version.strip() for version in listed.split(",") if version.strip()]
    raise IndexUnreachable(
        f"pip index versions {name} listed no versions; the package index "
        f"cannot be asked (check pip's configuration: PIP_INDEX_URL, "
        f"PIP_FIND_LINKS, pip.conf)"
    )


def sdist_sha256(name: str, version: str) -> str:
    """The sha256 of the sdist of NAME==VERSION the index serves, downloaded
    into scratch space without running anything in it."""
    progress(f"downloading the sdist of {name}=={version} to name its sha256")
    temporary = Path(tempfile.gettempdir())
    with scratch.directory(temporary, "newer") as work:
        with standin_environment(work, name, version) as env:
            dest = work / "sdist"
            # --use-pep517: without it pip runs setup.py egg_info for an sdist
            # without a pyproject.toml wherever wheel is installed.
            command = [
                *("download", "--no-deps", "--no-binary", ":all:"),
                *("--no-build-isolation", "--use-pep517", "--ignore-requires-python"),
                *("--dest", str(dest), f"{name}=={version}"),
            ]
            _pip(command, DOWNLOAD_TIMEOUT_S, f"download {name}=={version}", env)
        files = sorted(dest.iterdir()) if dest.is_dir() else []
        if len(files) != 1:
            raise IndexUnreachable(
                f"pip download {name}=={version} gave {len(files)} files, not its sdist"
            )
        return cache.sha256_of(files[0])


def _pip(args: list[str], timeout_s: float, purpose: str, env=None):
    """pip with ``args``, bounded; IndexUnreachable when it fails."""
    try:
        result = processes.run_bounded(
            [*PIP, *args], timeout_s=timeout_s, max_bytes=MAX_OUTPUT, env=env
        )
    except processes.BoundExceeded as exc:
        raise IndexUnreachable(
            f"the package index cannot be asked: pip, asked to {purpose}, {exc}"
        ) from None
    if result.returncode != 0:
        lines = [line.strip() for line in result.stderr.splitlines()]
        errors = [line for line in lines if _ERROR_LINE.match(line)]
        reason = (errors or [line for line in lines if line] or ["no output"])[-1]
        raise IndexUnreachable(
            f"the package index cannot be asked: pip, asked to {purpose}, exited "
            f"{result.returncode}: {reason}"
        )
    return result
