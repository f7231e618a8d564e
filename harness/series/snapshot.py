"""A clean git checkout as it was before the series, and putting it back.

`apply --onto` takes a snapshot before the first patch and restores it when
a patch fails or a stop signal arrives: the files the patches name are
written back byte for byte (mode included), quilt's `.pc` is removed, and
whatever else git then sees as changed or new is put back from the index or
removed. The checkout was clean, so what git saw before is all there was
beside its tracked files; the restore ends by checking that git sees that
again.
"""

import os
import shutil
from pathlib import Path

from harness import processes
from harness.errors import SeriesError
from harness.log import progress


class CheckoutSnapshot:
    """A clean checkout as it was before the series: the bytes and modes of
    the files the patches name, and what git sees beside its tracked files."""

    def __init__(self, checkout: Path, paths: set[str]):
        self.checkout = checkout
        self.files: dict[str, tuple[bytes, int] | None] = {}
        top = checkout.resolve()
        for path in sorted(paths):
            file = checkout / path
            if not file.resolve().is_relative_to(top):
                continue  # quilt and git apply refuse such a path themselves
            if file.is_file() and not file.is_symlink():
                self.files[path] = (file.read_bytes(), file.stat().st_mode)
            elif not file.exists() and not file.is_symlink():
                self.files[path] = None
        self.status = self._status()

    def _status(self) -> set[str]:
        output = _git(
            self.checkout,
            "status",
            "--porcelain",
            "-z",
            "--ignored",
            "--untracked-files=all",
        )
        if output is None:
            raise SeriesError(f"git status failed in {self.checkout}")
        return set(filter(None, output.split("\0")))

    def restore(self) -> None:
        """Put the checkout back as it was; stop signals wait until it is."""
        with processes.stop_signals_held():
            progress(f"restoring {self.checkout} as it was before the series")
            shutil.rmtree(self.checkout / ".pc", ignore_errors=True)
            for path, saved in self.files.items():
                self._put_back(path, saved)
            for entry in sorted(self._status() - self.status):
                self._undo(entry[:2], entry[3:])
            left = sorted(self._status() - self.status)
            if left:
                raise SeriesError(
                    f"could not restore {self.checkout} wholly; git still sees: "
                    f"{'; '.join(left[:3])}"
                )

    def _put_back(self, path: str, saved: tuple[bytes, int] | None) -> None:
        file = self.checkout / path
        if saved is None:
            if file.is_file() or file.is_symlink():
                file.unlink()
            _remove_empty_parents(file.parent, self.checkout)
            return
        if file.is_dir() and not file.is_symlink():
            shutil.rmtree(file)
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(saved[0])
        os.chmod(file, saved[1] & 0o7777)

    def _undo(self, code: str, path: str) -> None:
        """A change git sees that the saved files did not cover."""
        file = self.checkout / path
        if code in ("??", "!!"):
            if file.is_dir() and not file.is_symlink():
                shutil.rmtree(file)
            else:
                file.unlink(missing_ok=True)
            _remove_empty_parents(file.parent, self.checkout)
        else:
            _git(self.checkout, "checkout", "--", path)


def _remove_empty_parents(directory: Path, top: Path) -> None:
    while directory != top and directory.is_dir() and not any(directory.iterdir()):
        directory.rmdir()
        directory = directory.parent


def _git(checkout: Path, *args: str) -> str | None:
    result = processes.run(["git", "-C", str(checkout), *args])
    return result.stdout if result.returncode == 0 else None
