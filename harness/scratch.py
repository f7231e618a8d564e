"""Scratch space that goes away however the harness stops.

What the harness builds (a patched tree, an unpacked sdist, a capture file)
is built under a scratch name beside where it ends up and renamed into place
when whole. The scratch entry is removed when the block that made it ends:
on an error and on a stop signal too (harness.processes raises those as
exceptions). A SIGKILL or a power cut leaves it behind, which no process can
clean up in itself; so every scratch entry holds a lock (flock) for as long
as the run that made it lives, and the next run that makes scratch space of
the same purpose in the same directory removes those whose lock is free, and
says so.
"""

import fcntl
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from harness.errors import OutputError
from harness.log import progress

PREFIX = ".harness-scratch-"


def blocking_file(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` when it is not a directory
    (so ``path`` can never be made), else None."""
    parent = next((p for p in path.parents if p.exists()), None)
    return parent if parent is not None and not parent.is_dir() else None


def absolute(path: Path, what: str) -> Path:
    """``path`` made absolute from the working directory, lexically (as
    os.path.abspath does: a link is not followed); one line (OutputError,
    ``what`` the option that named it) where it is relative and the working
    directory is gone."""
    try:
        return Path(os.path.abspath(path))
    except OSError as exc:  # os.getcwd(): the directory was removed
        raise OutputError(
            f"{what} {path} is relative, and the working directory it would be "
            f"taken from cannot be read ({exc.strerror}: removed?); give an "
            f"absolute path, or run from a directory that exists"
        ) from None


def within_path_max(path: Path, what: str) -> None:
    """OutputError, one line that does not quote it whole, for a path longer
    than the system takes (PATH_MAX): no call can make or look at it."""
    limit = os.pathconf("/", "PC_PATH_MAX")
    if (length := len(os.fsencode(path))) >= limit:
        raise OutputError(
            f"cannot make {what} {str(path)[:80]}...: the path is {length} "
            f"bytes long, and the system takes paths under {limit}"
        )


def new_path(path: Path, what: str) -> Path:
    """``path``, absolute (`absolute`), as a place to make something new;
    OutputError, one line, where something is there already (a symlink
    too, followed nowhere), where it lies under a file, and where it cannot
    even be looked at (a name over NAME_MAX, a path over PATH_MAX:
    `within_path_max`, a symlink loop)."""
    path = absolute(path, what)
    within_path_max(path, what)
    try:
        if path.is_symlink():
            raise OutputError(
                f"{path} is a symlink (to {os.readlink(path)}); give a path that "
                f"does not exist yet"
            )
        if path.exists():
            raise OutputError(f"{path} already exists; remove it or choose another")
        if (blocking := blocking_file(path)) is not None:
            raise OutputError(f"cannot make {path}: {blocking} is not a directory")
        path.resolve()
    except (RuntimeError, OSError) as exc:  # a symlink loop (3.11: RuntimeError)
        raise OutputError(f"cannot make {path}: {_why(exc, path)}") from None
    return path


def _why(exc: Exception, path: Path) -> str:
    """One line for what went wrong at ``path``, naming the file where it is
    another one."""
    if not isinstance(exc, OSError):
        return str(exc)
    elsewhere = exc.filename and os.fspath(exc.filename) != os.fspath(path)
    return f"{exc.strerror or exc}{f': {exc.filename}' if elsewhere else ''}"


@contextmanager
def folders(folder: Path) -> Iterator[None]:
    """``folder`` and its missing parents, made for the block; those this run
    made are removed again, innermost first and each only while empty, when
    the block ends with an error or a stop signal (a folder another run made
    meanwhile is not this run's). What the block renamed into them keeps
    them."""
    made = _make_folders(folder)
    try:
        yield
    except BaseException:
        _remove_folders(made)
        raise


def _make_folders(folder: Path) -> list[Path]:
    """Make ``folder`` and its missing parents; return those this run made,
    outermost first, each in the list as soon as it exists (a later one that
    fails removes them)."""
    missing = []
    for candidate in (folder, *folder.parents):
        if candidate.exists() or candidate.is_symlink():
            break
        missing.append(candidate)
    made: list[Path] = []
    try:
        for candidate in reversed(missing):
            try:
                candidate.mkdir()
            except FileExistsError:
                continue  # another run's
            made.append(candidate)
    except BaseException:
        _remove_folders(made)
        raise
    return made


def _remove_folders(made: list[Path]) -> None:
    """Remove the folders `_make_folders` made, innermost first, each only if
    still empty (another run may have put something there)."""
    for folder in reversed(made):
        try:
            folder.rmdir()
        except OSError:
            return  # not empty, or gone: its parents stay too


def _prefix(purpose: str) -> str:
    return f"{PREFIX}{purpose}-"


def _locked_entry(parent: Path, purpose: str, is_directory: bool) -> tuple[Path, int]:
    """A new scratch entry in parent and a descriptor holding its lock.

    It is made and locked under a name that `sweep` does not look at, then
    renamed, so that a sweep never takes a live entry for a dead one.
    """
    if is_directory:
        staging = Path(tempfile.mkdtemp(dir=parent, prefix=".harness-new-"))
        descriptor = os.open(staging, os.O_RDONLY | os.O_DIRECTORY)
    else:
        descriptor, name = tempfile.mkstemp(dir=parent, prefix=".harness-new-")
        staging = Path(name)
        os.fchmod(descriptor, 0o666 & ~_umask())  # as open() would make it
    fcntl.flock(descriptor, fcntl.LOCK_EX)
    path = parent / f"{_prefix(purpose)}{os.getpid()}-{secrets.token_hex(4)}"
    os.rename(staging, path)
    return path, descriptor


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def sweep(parent: Path, purpose: str) -> list[Path]:
    """Remove the scratch entries of ``purpose`` in parent that no live run
    holds (left by a run that was killed); say so for each, return them."""
    removed = []
    try:
        candidates = sorted(parent.glob(f"{_prefix(purpose)}*"))
    except OSError:
        return removed
    for path in candidates:
        try:
            descriptor = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # a live run holds it
        else:
            _remove(path)
            removed.append(path)
            progress(f"removed {path}, left behind by an earlier run that was killed")
        finally:
            os.close(descriptor)
    return removed


@contextmanager
def directory(parent: Path, purpose: str) -> Iterator[Path]:
    """A new, locked scratch directory in parent, removed when the block ends
    (whatever the block has not renamed out of it goes with it)."""
    sweep(parent, purpose)
    path, descriptor = _locked_entry(parent, purpose, is_directory=True)
    try:
        yield path
    finally:
        _remove(path)
        os.close(descriptor)


@contextmanager
def replacing(target: Path, purpose: str) -> Iterator[BinaryIO]:
    """A file opened for writing that replaces ``target`` when the block ends
    normally; on any exception ``target`` is left as it was."""
    sweep(target.parent, purpose)
    path, descriptor = _locked_entry(target.parent, purpose, is_directory=False)
    try:
        with open(descriptor, "wb", closefd=False) as sink:
            yield sink
        os.rename(path, target)
    finally:
        path.unlink(missing_ok=True)
        os.close(descriptor)
