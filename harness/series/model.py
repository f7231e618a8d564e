"""A quilt series: the series file and the patches it names, as read from disk.

A series that the harness would apply differently depending on the tool is
refused when it is loaded: a patch with CRLF line endings (quilt's patch
strips the CRs, git apply does not, so the result depended on whether quilt
was installed), and an empty series (it "applies" by changing nothing).
"""

import hashlib
from dataclasses import dataclass
from pathlib import Path

from harness.errors import SeriesError
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

    def touched_paths(self) -> set[str]:
        """Tree paths the patches' ``---``/``+++`` headers name (both sides)."""
        paths = set()
        for entry in self.entries:
            for line in self.patch_path(entry).read_bytes().splitlines():
                if line.startswith((b"--- ", b"+++ ")):
                    name = line[4:].split(b"\t")[0].strip().decode("utf-8", "replace")
                    if name != "/dev/null":
                        paths.add("/".join(name.split("/")[entry.strip :]))
        return {path for path in paths if path}

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
        if not series.patch_path(entry).is_file():
            raise SeriesError(
                f"{series_file} names {entry.patch}, but "
                f"{series.patch_path(entry)} does not exist"
            )
        if error := crlf_error(series.patch_path(entry)):
            raise SeriesError(error)
    return series


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
