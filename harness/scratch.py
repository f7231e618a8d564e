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

from harness.log import progress

PREFIX = ".harness-scratch-"


def blocking_file(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` when it is not a directory
    (so ``path`` can never be made), else None."""
    parent = next((p for p in path.parents if p.exists()), None)
    return parent if parent is not None and not parent.is_dir() else None


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
