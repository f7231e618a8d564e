"""Pristine vLLM trees for the targets, fetched once into a shared cache.

An sdist is fetched through pip, so the user's index configuration (pip.conf,
PIP_INDEX_URL, PIP_FIND_LINKS, ...) is honoured, in pip's hash-checking mode:
the requirement carries the pinned sha256 and pip checks the archive against
it as soon as it is downloaded. pip then prepares the sdist's metadata, which
would run vLLM's setup.py (torch, cmake, ninja, setuptools_rust...); the
harness has pip ask a stand-in build backend instead
(harness/trees/metadata_standin.py), so nothing from the archive ever runs
and no build tool is needed. `--use-pep517` makes pip ask that backend for an
sdist without a pyproject.toml too: without it, a pip that can import
setuptools and wheel (older than 25) runs the sdist's own ``setup.py
egg_info``. The harness checks the sha256 again before
unpacking, and a cached sdist that no longer matches its pin is moved to the
cache's quarantine and fetched again.

Trees and sdists live in the harness cache (harness.cache), written under a
lock in scratch space (harness.scratch) and moved into place only when
complete: an unpacked tree only once every member the archive lists is on
disk as it lists it, so files removed from the scratch while it unpacks
(something deleting in the cache) are never cached as the pristine tree. A
warm cache needs no network.
"""

import gzip
import os
import re
import shutil
import stat
import sys
import tarfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from harness import cache, processes, scratch
from harness.errors import SourceError
from harness.log import progress
from harness.targets import GitSource, PathSource, SdistSource, Target

# pip's own errors, and the exception a failed metadata build ends with.
_ERROR_LINE = re.compile(r"ERROR: |\w+(Error|Exception): ")
# How pip's hash-checking mode names the digest of an archive it refused.
_GOT_DIGEST = re.compile(r"^\s*Got\s+([0-9a-f]{64})\s*$", re.MULTILINE)
# What reading a broken .tar.gz raises, beside tarfile's own errors.
_BROKEN_ARCHIVE = (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile)


class DownloadError(Exception):
    """The downloader could not fetch the sdist; the message says why."""


class HashMismatch(DownloadError):
    """The index served an archive whose sha256 is not the pinned one."""

    def __init__(self, actual: str):
        super().__init__(f"the archive served has sha256 {actual}")
        self.actual = actual


Downloader = Callable[[SdistSource, Path], None]


def pip_download(source: SdistSource, dest_dir: Path) -> None:
    """Download the sdist into dest_dir with pip, in hash-checking mode, its
    metadata named by the stand-in backend (nothing in the archive runs)."""
    with standin_environment(dest_dir.parent, source.name, source.version) as env:
        _pip_download(source, dest_dir, env)


@contextmanager
def standin_environment(parent: Path, name: str, version: str) -> Iterator[dict]:
    """The environment in which `pip download --no-build-isolation` of the
    sdist NAME==VERSION asks the stand-in build backend for its metadata
    (a scratch folder in parent holds it while the block runs)."""
    with scratch.directory(parent, "standin") as standin:
        package = standin / "setuptools"
        package.mkdir()
        (package / "__init__.py").write_text("")
        shutil.copyfile(
            Path(__file__).with_name("metadata_standin.py"), package / "build_meta.py"
        )
        paths = [str(standin), *filter(None, [os.environ.get("PYTHONPATH")])]
        yield {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(paths),
            "HARNESS_STANDIN_NAME": name,
            "HARNESS_STANDIN_VERSION": version,
        }


def _pip_download(source: SdistSource, dest_dir: Path, env: dict) -> None:
    command = [
        *(sys.executable, "-m", "pip", "download", "--no-deps"),
        *("--no-binary", ":all:", "--no-build-isolation", "--use-pep517"),
        "--require-hashes",
        *("--requirement", "/dev/stdin", "--dest", str(dest_dir)),
    ]
    requirement = f"{source.name}=={source.version} --hash=sha256:{source.sha256}\n"
    result = processes.run(command, env=env, input=requirement)
    if result.returncode != 0:
        if refused := _GOT_DIGEST.search(result.stderr):
            raise HashMismatch(refused[1])
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
            try:
                _build_tree(target, tree, downloader or pip_download)
            except OSError as exc:  # writing the cache; reading is handled
                raise cache.unusable(exc) from None
    return tree


def _build_tree(target: Target, tree: Path, downloader: Downloader) -> None:
    cache.directory(tree.parent)
    if isinstance(target.source, SdistSource):
        _unpack(target.name, _verified_sdist(target, downloader), tree)
    else:
        _clone(target.name, target.source, tree)


def cached_sdist(target: Target) -> Path | None:
    """The target's sdist in the cache if it matches its pin, else None; a
    cached copy that does not match is moved to the quarantine, with a
    warning that says so."""
    source = target.source
    archive = cache.sdists() / f"{source.name}-{source.version}.tar.gz"
    if not archive.is_file():
        return None
    if cache.matches_pin(archive, source.sha256):
        return archive
    return None


def _verified_sdist(target: Target, downloader: Downloader) -> Path:
    source = target.source
    sdists = cache.directory(cache.sdists())
    if archive := cached_sdist(target):
        return archive
    archive = sdists / f"{source.name}-{source.version}.tar.gz"
    progress(f"fetching {source.name}=={source.version} through pip")
    with scratch.directory(sdists, "download") as download:
        try:
            downloader(source, download)
        except HashMismatch as exc:
            raise SourceError(_tampered(target, exc.actual)) from None
        except DownloadError as exc:
            raise SourceError(
                f"target {target.name}: cannot fetch {source.name}=={source.version} "
                f"into the cold cache {cache.root()} ({exc}); run once where the "
                f"package index is reachable, point PIP_INDEX_URL or "
                f"PIP_FIND_LINKS at a mirror that has the sdist, or set "
                f"HARNESS_CACHE_DIR to a filled cache"
            ) from None
        files = list(download.iterdir())
        if len(files) != 1:
            names = ", ".join(sorted(file.name for file in files)) or "nothing"
            raise SourceError(
                f"target {target.name}: expected one sdist from the download, "
                f"got {names}"
            )
        if (actual := cache.sha256_of(files[0])) != source.sha256:
            raise SourceError(_tampered(target, actual))
        os.replace(files[0], archive)
    return archive


def sdist_archive(target: Target, downloader: Downloader | None = None) -> Path:
    """The target's sdist in the cache, its sha256 the pinned one, fetched
    with `downloader` (by default `pip_download`) if it is missing."""
    source = target.source
    if not isinstance(source, SdistSource):
        raise SourceError(
            f"target {target.name}'s source is {source.describe()}, not a "
            f"released sdist"
        )
    with cache.lock(cache.pristine_tree(source.identity()).name):
        try:
            return _verified_sdist(target, downloader or pip_download)
        except OSError as exc:
            raise cache.unusable(exc) from None


def sdist_members(target: Target, archive: Path, paths) -> dict[str, bytes | None]:
    """The bytes of each tree path in the sdist (None where it holds none),
    read from the archive; nothing is unpacked."""
    wanted = set(paths)
    found: dict[str, bytes] = {}
    try:
        with tarfile.open(archive) as tar:
            for member in tar:
                path = member.name.partition("/")[2]
                if path in wanted and member.isfile():
                    found[path] = tar.extractfile(member).read()
    except _BROKEN_ARCHIVE as exc:
        raise SourceError(
            f"target {target.name}: {archive} is not a readable .tar.gz "
            f"({_first_line(exc)})"
        ) from None
    return {path: found.get(path) for path in sorted(wanted)}


def _tampered(target: Target, actual: str) -> str:
    source = target.source
    return (
        f"target {target.name}: the package index served {source.name}=="
        f"{source.version} with sha256 {actual}, but harness/targets.toml pins "
        f"{source.sha256}; refused before anything in it ran. Check the index or "
        f"mirror pip uses (PIP_INDEX_URL, PIP_FIND_LINKS, pip.conf), or the pin"
    )


def _unpack(target_name: str, archive: Path, tree: Path) -> None:
    progress(f"unpacking {archive.name}")
    with scratch.directory(tree.parent, "unpack") as work:
        try:
            with tarfile.open(archive) as tar:
                tar.extractall(work, filter="data")
                members = tar.getmembers()
        except tarfile.FilterError as exc:
            raise SourceError(
                f"target {target_name}: {archive.name} has an unsafe member ({exc})"
            ) from None
        except _BROKEN_ARCHIVE as exc:
            raise SourceError(
                f"target {target_name}: {archive} is not a readable .tar.gz "
                f"({_first_line(exc)}), although its sha256 is the "
                f"pinned one: the pin in harness/targets.toml names a broken file"
            ) from None
        if missing := _not_unpacked(members, work):
            raise SourceError(
                f"target {target_name}: {len(missing)} of the {len(members)} "
                f"members of {archive.name} are not in its unpacked tree as the "
                f"archive lists them ({', '.join(missing[:3])}): something "
                f"changed the cache's unpack directory meanwhile; nothing was "
                f"cached: fetch again"
            )
        entries = list(work.iterdir())
        if len(entries) != 1 or not entries[0].is_dir():
            raise SourceError(
                f"target {target_name}: {archive.name} does not hold exactly one "
                f"top-level directory"
            )
        entries[0].rename(tree)


def _not_unpacked(members: list[tarfile.TarInfo], work: Path) -> list[str]:
    """The members the archive lists that are not on disk under ``work`` as
    it lists them (a file of its size, a directory, a link), once unpacked:
    a tree someone removed files from while it was unpacked is never cached
    as the pristine one (a later member of the same name counts)."""
    last = {member.name.lstrip("/"): member for member in members}
    missing = []
    for name, member in last.items():
        try:
            info = os.lstat(work / name)
        except OSError:
            missing.append(name)
            continue
        if member.isreg() or member.islnk():
            whole = stat.S_ISREG(info.st_mode) and (
                member.islnk() or info.st_size == member.size
            )
        elif member.isdir():
            whole = stat.S_ISDIR(info.st_mode)
        else:
            whole = not member.issym() or stat.S_ISLNK(info.st_mode)
        if not whole:
            missing.append(name)
    return sorted(missing)


def _clone(target_name: str, source: GitSource, tree: Path) -> None:
    progress(f"cloning {source.url} at {source.commit}")
    with scratch.directory(tree.parent, "clone") as work:
        checkout = work / "checkout"
        steps = (
            ["clone", "--quiet", "--no-checkout", source.url, str(checkout)],
            ["-C", str(checkout), "checkout", "--quiet", "--detach", source.commit],
        )
        for step in steps:
            result = processes.run(["git", *step])
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
    """The target's pristine tree if it can be had without a download (a
    cached sdist is unpacked), else None."""
    source = target.source
    if isinstance(source, PathSource):
        return source.path if source.path.is_dir() else None
    tree = cache.pristine_tree(source.identity())
    if tree.is_dir():
        return tree
    if isinstance(source, SdistSource) and cached_sdist(target):
        return pristine_tree(target, _no_download)
    return None


def _no_download(source: SdistSource, dest_dir: Path) -> None:
    raise DownloadError("not downloading: only a cached sdist is used here")


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0].rstrip(":")
