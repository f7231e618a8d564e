"""Pristine vLLM trees for the targets, fetched once into a shared cache.

An sdist is fetched through pip, so the user's index configuration (pip.conf,
PIP_INDEX_URL, PIP_FIND_LINKS, ...) is honoured. vLLM's setup.py runs while pip
prepares the metadata, so the Python running the harness needs torch and
vLLM's build requirements: setuptools_rust setuptools_scm wheel packaging
jinja2 cmake ninja (tox.ini installs them). The sdist's sha256 is checked
against the pin before anything is unpacked.

Trees and sdists live in the harness cache (harness.cache), written under a
lock and moved into place only when complete; a warm cache needs no network.
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from harness import cache
from harness.errors import SourceError
from harness.log import progress
from harness.targets import GitSource, PathSource, SdistSource, Target

# pip's own errors, and the exception a failed metadata build ends with.
_ERROR_LINE = re.compile(r"ERROR: |\w+(Error|Exception): ")


class DownloadError(Exception):
    """The downloader could not fetch the sdist; the message says why."""


Downloader = Callable[[SdistSource, Path], None]


def pip_download(source: SdistSource, dest_dir: Path) -> None:
    """Download the sdist into dest_dir with pip."""
    env = {
        **os.environ,
        "VLLM_VERSION_OVERRIDE": source.version,
        "VLLM_TARGET_DEVICE": "empty",
    }
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        ":all:",
        "--no-build-isolation",
        f"{source.name}=={source.version}",
        "-d",
        str(dest_dir),
    ]
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        lines = [line.strip() for line in result.stderr.splitlines()]
        errors = [line for line in lines if _ERROR_LINE.match(line)]
        reason = (errors or [line for line in lines if line] or ["no output"])[-1]
        raise DownloadError(f"pip download exited {result.returncode}: {reason}")


def pristine_tree(target: Target, downloader: Downloader | None = None) -> Path:
    """The unpacked pristine source tree of a target (read it, never write it).

    An sdist missing from the cache is fetched with `downloader`, by default
    `pip_download`.
    """
    source = target.source
    if isinstance(source, PathSource):
        if not source.path.is_dir():
            raise SourceError(
                f"target {target.name}: source path {source.path} is not a directory"
            )
        return source.path
    tree = cache.pristine_tree(source.identity())
    if tree.is_dir():
        return tree
    with cache.lock(tree.name):
        if not tree.is_dir():
            tree.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(source, SdistSource):
                archive = _verified_sdist(target, downloader or pip_download)
                _unpack(target.name, archive, tree)
            else:
                _clone(target.name, source, tree)
    return tree


def _verified_sdist(target: Target, downloader: Downloader) -> Path:
    source = target.source
    sdists = cache.sdists()
    sdists.mkdir(parents=True, exist_ok=True)
    archive = sdists / f"{source.name}-{source.version}.tar.gz"
    if archive.is_file():
        _check_sha256(target, archive)
        return archive
    progress(f"fetching {source.name}=={source.version} through pip")
    with tempfile.TemporaryDirectory(dir=sdists, prefix=".download-") as download:
        try:
            downloader(source, Path(download))
        except DownloadError as exc:
            raise SourceError(
                f"target {target.name}: cannot fetch {source.name}=={source.version} "
                f"into the cold cache {cache.root()} ({exc}); run once where the "
                f"package index is reachable, with torch and vLLM's build tools "
                f"installed (README, Settings), point PIP_INDEX_URL or "
                f"PIP_FIND_LINKS at a mirror that has the sdist, or set "
                f"HARNESS_CACHE_DIR to a filled cache"
            ) from None
        files = list(Path(download).iterdir())
        if len(files) != 1:
            names = ", ".join(sorted(file.name for file in files)) or "nothing"
            raise SourceError(
                f"target {target.name}: expected one sdist from the download, "
                f"got {names}"
            )
        _check_sha256(target, files[0])
        os.replace(files[0], archive)
    return archive


def _check_sha256(target: Target, archive: Path) -> None:
    digest = hashlib.sha256()
    with archive.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    if digest.hexdigest() != target.source.sha256:
        raise SourceError(
            f"target {target.name}: {archive.name} has sha256 {digest.hexdigest()} but "
            f"harness/targets.toml pins {target.source.sha256}; refusing to unpack it"
        )


def _unpack(target_name: str, archive: Path, tree: Path) -> None:
    progress(f"unpacking {archive.name}")
    with tempfile.TemporaryDirectory(dir=tree.parent, prefix=".unpack-") as scratch:
        try:
            with tarfile.open(archive) as tar:
                tar.extractall(scratch, filter="data")
        except tarfile.FilterError as exc:
            raise SourceError(
                f"target {target_name}: {archive.name} has an unsafe member ({exc})"
            ) from None
        entries = list(Path(scratch).iterdir())
        if len(entries) != 1 or not entries[0].is_dir():
            raise SourceError(
                f"target {target_name}: {archive.name} does not hold exactly one "
                f"top-level directory"
            )
        entries[0].rename(tree)


def _clone(target_name: str, source: GitSource, tree: Path) -> None:
    progress(f"cloning {source.url} at {source.commit}")
    with tempfile.TemporaryDirectory(dir=tree.parent, prefix=".clone-") as scratch:
        checkout = Path(scratch) / "checkout"
        steps = (
            ["clone", "--quiet", "--no-checkout", source.url, str(checkout)],
            ["-C", str(checkout), "checkout", "--quiet", "--detach", source.commit],
        )
        for step in steps:
            result = subprocess.run(["git", *step], capture_output=True, text=True)
            if result.returncode != 0:
                reason = (result.stderr.strip().splitlines() or ["no output"])[-1]
                raise SourceError(
                    f"target {target_name}: cannot get commit {source.commit} from "
                    f"{source.url} into the cold cache {cache.root()} (git: {reason}); "
                    f"run once where that repository is reachable, or set "
                    f"HARNESS_CACHE_DIR to a filled cache"
                )
        shutil.rmtree(checkout / ".git")
        checkout.rename(tree)


def cached_pristine_tree(target: Target) -> Path | None:
    """The target's pristine tree if it needs no download, else None."""
    source = target.source
    if isinstance(source, PathSource):
        return source.path if source.path.is_dir() else None
    tree = cache.pristine_tree(source.identity())
    return tree if tree.is_dir() else None
