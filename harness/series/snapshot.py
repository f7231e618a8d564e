"""The files of a checkout that a series changes: read before the series, and
written into the checkout only once it applied whole elsewhere.

`apply --onto` applies the series to a scratch copy of the files it touches
(`CheckoutFiles.copy_to`), never in the checkout itself, so a failing patch,
a stop signal or a slow applier leave the checkout as it was. Then
`install` writes what the series changed in one step that stop signals wait
for: every file it is about to write is first checked to be as it was read
(one someone changed meanwhile is named, and nothing is written), then each
is written under a scratch name beside it, the original renamed aside
(``.harness-original-*``, whole, its inode kept) and the new file renamed
into place; once all are, the originals go. If a write fails (a full or
read-only filesystem), or a stop signal arrived while they were written,
each original is renamed back: putting the checkout back writes no byte,
so it needs no space, and the error is one line. Nothing else in the
checkout is ever touched: a file the user makes or edits while the verb
runs stays as it is.

Only regular files are read or written, reached through no symlink: a path
the patches name that the tree holds as a symlink, a directory or a special
file (or under a file) is refused before any work.
"""

import os
import secrets
import stat
from contextlib import suppress
from pathlib import Path

from harness import processes, scratch
from harness.errors import OutputError, SeriesError
from harness.log import progress, warning

# A file's bytes and permission bits, or None where there is no file.
FileState = tuple[bytes, int] | None
# The name an original file of the checkout has, beside the file, while the
# patched one replaces it (`CheckoutFiles.install`).
ORIGINAL = ".harness-original-"


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
        """Write the files the series changed, then say ``done(count)``; a
        stop signal that arrives while they are written waits for them, then
        puts them back."""
        changes = {
            path: state for path, state in after.items() if state != self.before[path]
        }
        try:
            with processes.stop_signals_held():
                self._refuse_changed(changes)
                for path, state in changes.items():
                    self._put(path, state)
        except BaseException as exc:
            self._failed(exc)
        with processes.stop_signals_held():
            self._drop_originals(changes)
            progress(done(len(changes)))

    def _failed(self, exc: BaseException) -> None:
        """Put back what was written, then end the verb: one line for an
        OSError or for what could not be put back, else ``exc`` itself."""
        with processes.stop_signals_held():
            kept = self._undo()
        if kept:
            raise OutputError(
                f"{self._cause(exc)}; nor could {'; '.join(kept[:3])} be put "
                f"back (an original stays beside its file as {ORIGINAL}*): "
                f"git status shows what differs"
            ) from None
        if isinstance(exc, OSError):
            raise OutputError(f"{self._cause(exc)}; it is as it was") from None
        raise exc

    def _cause(self, exc: BaseException) -> str:
        if isinstance(exc, OSError):
            return (
                f"cannot write the patched files into {self.checkout}: "
                f"{exc.strerror or exc}{_where(exc)}"
            )
        return f"stopped while the patched files were written into {self.checkout}"

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
        """The file's new bytes written beside it first, then its original
        renamed aside (kept whole, same inode, for `_undo`), then the new
        file renamed into place; a deleted file is only renamed aside."""
        file = self.checkout / path
        if state is None:
            self._written.append((path, _set_aside(file)))
            return
        missing = [p for p in file.parents if p != self.checkout and not p.exists()]
        for directory in reversed(missing):
            if directory.is_relative_to(self.checkout):
                directory.mkdir()
                self._made.append(directory)
        if self.before[path] is None:
            self._written.append((path, None))
            _write(file, state)
        else:
            _write(file, state, lambda: self._written.append((path, _set_aside(file))))

    def _drop_originals(self, changes: dict[str, FileState]) -> None:
        """Every file is written: the originals set aside go, then the
        directories a deleted file left empty (as git apply and patch do)."""
        for _, original in self._written:
            if original is not None:
                try:
                    original.unlink()
                except OSError as exc:
                    warning(f"could not remove {original}: {exc.strerror}")
        self._written, self._made = [], []
        for path, state in changes.items():
            if state is None:
                _remove_empty_parents((self.checkout / path).parent, self.checkout)

    def _undo(self) -> list[str]:
        """Put back the files written so far as they were read: each
        original renamed back over what replaced it, a new file removed.
        Nothing is written, so a full or failing filesystem cannot stop it;
        what still could not be put back is returned (its original stays
        beside it)."""
        kept = []
        for path, original in reversed(self._written):
            file = self.checkout / path
            try:
                if original is None:
                    file.unlink(missing_ok=True)
                else:
                    os.replace(original, file)
            except OSError as exc:
                kept.append(f"{file} ({exc.strerror})")
        for directory in reversed(self._made):
            with suppress(OSError):
                directory.rmdir()  # only if empty
        self._written, self._made = [], []
        return kept


def _set_aside(file: Path) -> Path:
    """Rename ``file`` to a name beside it, keeping it whole."""
    aside = file.with_name(f"{ORIGINAL}{os.getpid()}-{secrets.token_hex(4)}")
    os.rename(file, aside)
    return aside


def _write(file: Path, state: tuple[bytes, int], written=None) -> None:
    """file's bytes and mode, written under a scratch name and renamed over
    it; ``written()``, if given, runs once they are whole, before the rename."""
    file.parent.mkdir(parents=True, exist_ok=True)
    with scratch.replacing(file, "onto") as sink:
        sink.write(state[0])
        sink.flush()
        os.fchmod(sink.fileno(), state[1])
        if written is not None:
            written()


def _remove_empty_parents(directory: Path, top: Path) -> None:
    """As git apply and patch do once a file is deleted (as far as it can:
    the series is in place by then)."""
    with suppress(OSError):
        while directory != top and not any(directory.iterdir()):
            directory.rmdir()
            directory = directory.parent


def _where(exc: OSError) -> str:
    return f" ({exc.filename})" if exc.filename else ""
