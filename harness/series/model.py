"""A quilt series: the series file and the patches it names, as read from disk.

A series is refused when it is loaded, before any tool runs, if it could
reach outside the tree or would apply differently depending on the tool:

- an entry that names a patch outside its patches directory (an absolute
  path, a `..` component, a symlink that leads out), or a patch that names a
  path outside the tree, inside `.git/` or `.pc/`, a symlink, a binary or a
  context diff (harness.series.patch_paths says why each);
- a patch with CRLF line endings (quilt's patch strips the CRs, git apply
  does not, so the result depended on whether quilt was installed), and an
  empty series (it "applies" by changing nothing).
"""

import hashlib
from dataclasses import dataclass
from pathlib import Path

from harness.errors import SeriesError
from harness.series.patch_paths import PatchFiles, read_patch
from harness.targets import Target


@dataclass(frozen=True)
class SeriesEntry:
    patch: str  # path inside the patches directory, as the series file names it
    strip: int  # -pN


@dataclass(frozen=True)
class Series:
    patches_dir: Path
    series_file: Path
    entries: tuple[SeriesEntry, ...]

    def patch_path(self, entry: SeriesEntry) -> Path:
        return self.patches_dir / entry.patch

    def patch_files(self, entry: SeriesEntry) -> PatchFiles:
        return read_patch(self.patch_path(entry).read_bytes(), entry.strip)

    def touched_paths(self) -> set[str]:
        """Tree paths the patches name (both sides of every file they touch)."""
        return {
            path for entry in self.entries for path in self.patch_files(entry).paths
        }

    def digest(self) -> str:
        """sha256 over the series file and every patch it names."""
        digest = hashlib.sha256(self.series_file.read_bytes())
        for entry in self.entries:
            digest.update(entry.patch.encode() + b"\0")
            digest.update(self.patch_path(entry).read_bytes())
        return digest.hexdigest()


def read_series(series_file: Path) -> tuple[SeriesEntry, ...]:
    """Parse a quilt series file: `PATCH [-pN]` per line, `#` starts a comment."""
    entries = []
    for number, raw in enumerate(series_file.read_bytes().splitlines(), 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SeriesError(
                f"{series_file}:{number}: not UTF-8 (byte 0x{raw[exc.start]:02x} at "
                f"column {exc.start + 1}); a series file names its patches in UTF-8"
            ) from None
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        patch, *options = words
        if reason := entry_problem(patch):
            raise SeriesError(f"{series_file}:{number}: {patch}: {reason}")
        strip = 1
        for option in options:
            if not (option.startswith("-p") and option[2:].isdigit()):
                raise SeriesError(
                    f"{series_file}:{number}: option {option!r} of {patch} is not "
                    f"understood (only -pN is)"
                )
            strip = int(option[2:])
        entries.append(SeriesEntry(patch, strip))
    return tuple(entries)


def load_series(target: Target, tier: str) -> Series:
    series_file = target.series_file(tier)
    if not series_file.is_file():
        raise SeriesError(
            f"target {target.name}: the {tier} tier's series file {series_file} "
            f"does not exist"
        )
    series = Series(target.patches_dir, series_file, read_series(series_file))
    if not series.entries:
        raise SeriesError(f"{series_file} lists no patch; there is nothing to apply")
    for entry in series.entries:
        if error := patch_error(series, entry):
            raise SeriesError(error)
    return series


def entry_problem(patch: str) -> str | None:
    """Why a series file's entry names no patch of its directory, or None."""
    if patch.startswith("/"):
        return "an absolute path; a series names patches inside its own directory"
    if ".." in patch.split("/"):
        return "leads out of the patches directory (a '..' component)"
    if patch.startswith("-"):
        return "starts with '-', which quilt would read as an option"
    return None


def patch_error(series: Series, entry: SeriesEntry) -> str | None:
    """Why one patch of a series is refused before any tool runs, or None."""
    path = series.patch_path(entry)
    if not path.is_file():
        return f"{series.series_file} names {entry.patch}, but {path} does not exist"
    inside = series.patches_dir.resolve()
    if not path.resolve().is_relative_to(inside):
        return (
            f"{series.series_file} names {entry.patch}, which is a link to "
            f"{path.resolve()}, outside {inside}"
        )
    if error := crlf_error(path):
        return error
    problems = series.patch_files(entry).problems
    if problems:
        number, reason = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return f"{path}:{number}: {reason}{more}"
    return None


def crlf_error(patch: Path) -> str | None:
    """Why a patch with CRLF line endings is refused, or None."""
    data = patch.read_bytes()
    position = data.find(b"\r\n")
    if position < 0:
        return None
    line = data.count(b"\n", 0, position) + 1
    return (
        f"{patch}:{line}: CRLF line ending; quilt applies such a patch and git "
        f"apply does not, so convert it to LF (dos2unix) and check it still applies"
    )
