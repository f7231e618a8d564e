"""The files of a checkout that a series changes: read before the series, and
written into the checkout only once it applied whole elsewhere.

`apply --onto` applies the series to a scratch copy of the files it touches
(`CheckoutFiles.copy_to`), never in the checkout itself, so a failing patch,
a stop signal or a slow applier leave the checkout as it was. Then
`install` writes what the series changed in one step that stop signals wait
for: every file it is about to write is first checked to be as it was read
(one someone changed meanwhile is named, and nothing is written), then each
is written under a scratch name beside it and renamed into place. If a
write fails, or a stop signal arrived while they were written, the files
written are put back as they were read. Nothing else in the checkout is
ever touched: a file the user makes or edits while the verb runs stays as
it is.

Only regular files are read or written, reached through no symlink: a path
the patches name that the tree holds as a symlink, a directory or a special
file (or under a file) is refused before any work.
"""

import os
import stat
from pathlib import Path

from harness import processes, scratch
from harness.errors import OutputError, SeriesError
from harness.log import progress

# A file's bytes and permission bits, or None where there is no file.
FileState = tuple[bytes, int] | None


def read_state(root: Path, path: str) -> FileState:
    """The state of root/path; SeriesError if it is not a regular file (or
    absent) reached through directories only."""
    current = root
    parts = path.split("/")
    for depth, part in enumerate(parts):
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            return None
        shown = "/".join(parts[: depth + 1])
        last = depth == len(parts) - 1
        if stat.S_ISLNK(info.st_mode):
            raise SeriesError(
                f"{root}: {shown} is a symlink, and the series names {path}; a "
                f"patch may reach only the tree's own files, through no symlink"
            )
        if not last and not stat.S_ISDIR(info.st_mode):
            raise SeriesError(
                f"{root}: the series names {path}, but {shown} is not a directory"
            )
        if last and not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a file"
            raise SeriesError(f"{root}: the series names {path}, which is {kind}")
    return current.read_bytes(), stat.S_IMODE(info.st_mode)


def read_states(root: Path, paths) -> dict[str, FileState]:
    return {path: read_state(root, path) for path in sorted(paths)}


class CheckoutFiles:
    """The files of a checkout a series names, as they were before it."""

    def __init__(self, checkout: Path, paths):
        self.checkout = checkout
        self.before = read_states(checkout, paths)
        self._written: list[tuple[str, FileState]] = []
        self._made: list[Path] = []

    def copy_to(self, tree: Path) -> None:
        """The files that exist, with their modes, at the same paths in tree."""
        tree.mkdir()
        for path, state in self.before.items():
            if state is not None:
                _write(tree / path, state)

    def states_in(self, tree: Path) -> dict[str, FileState]:
        """What the series made of the files in tree; SeriesError if it wrote
        any file the patches do not name."""
        after = read_states(tree, self.before)
        stray = sorted(
            str(file.relative_to(tree))
            for file in tree.rglob("*")
            if not file.is_dir() and str(file.relative_to(tree)) not in after
        )
        if stray:
            raise SeriesError(
                f"applying the series wrote {', '.join(stray[:3])}, which no "
                f"patch header names; refused, nothing was written to "
                f"{self.checkout}"
            )
        return after

    def line_ending_hint(self) -> str:
        """Why a patch may not apply to this checkout: files it names that
        hold CRLF line endings (a .gitattributes eol, core.autocrlf)."""
        crlf = [
            path
            for path, state in self.before.items()
            if state is not None and b"\r\n" in state[0]
        ]
        if not crlf:
            return ""
        return (
            f"\n    {self.checkout}: {', '.join(crlf[:3])} hold(s) CRLF line "
            f"endings (a .gitattributes eol or core.autocrlf setting?); the "
            f"series is made against LF files"
        )

    def install(self, after: dict[str, FileState], done) -> None:
        """Write the files the series changed, then say ``done(count)`` before
        a stop signal that arrived meanwhile acts: a stop while the files are
        written puts them back."""
        changes = {
            path: state for path, state in after.items() if state != self.before[path]
        }
        try:
            with processes.stop_signals_held():
                self._refuse_changed(changes)
                for path, state in changes.items():
                    self._put(path, state)
                progress(done(len(changes)))
        except BaseException as exc:
            with processes.stop_signals_held():
                self._undo()
            if isinstance(exc, OSError):
                raise OutputError(
                    f"cannot write the patched files into {self.checkout}: "
                    f"{exc.strerror or exc}{_where(exc)}; it is as it was"
                ) from None
            raise

    def _refuse_changed(self, changes: dict[str, FileState]) -> None:
        """Nothing is written over a file that changed since it was read."""
        changed = [
            path
            for path in changes
            if read_state(self.checkout, path) != self.before[path]
        ]
        if changed:
            raise SeriesError(
                f"{self.checkout}: {', '.join(changed[:5])} changed while the "
                f"series applied, not by the harness; nothing was written, and "
                f"the changes are left as they are"
            )

    def _put(self, path: str, state: FileState) -> None:
        file = self.checkout / path
        self._written.append((path, self.before[path]))
        if state is None:
            file.unlink()
            _remove_empty_parents(file.parent, self.checkout)
            return
        missing = [p for p in file.parents if p != self.checkout and not p.exists()]
        for directory in reversed(missing):
            if directory.is_relative_to(self.checkout):
                directory.mkdir()
                self._made.append(directory)
        _write(file, state)

    def _undo(self) -> None:
        """Put back the files written so far as they were read."""
        for path, state in reversed(self._written):
            file = self.checkout / path
            if state is None:
                file.unlink(missing_ok=True)
            else:
                file.parent.mkdir(parents=True, exist_ok=True)
                _write(file, state)
        for directory in reversed(self._made):
            if directory.is_dir() and not any(directory.iterdir()):
                directory.rmdir()
        self._written, self._made = [], []


def _write(file: Path, state: tuple[bytes, int]) -> None:
    """file's bytes and mode, written under a scratch name and renamed."""
    file.parent.mkdir(parents=True, exist_ok=True)
    with scratch.replacing(file, "onto") as sink:
        sink.write(state[0])
        sink.flush()
        os.fchmod(sink.fileno(), state[1])


def _remove_empty_parents(directory: Path, top: Path) -> None:
    """As git apply and patch do once a file is deleted."""
    while directory != top and directory.is_dir() and not any(directory.iterdir()):
        directory.rmdir()
        directory = directory.parent


def _where(exc: OSError) -> str:
    return f" ({exc.filename})" if exc.filename else ""
