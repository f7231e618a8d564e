"""A quilt series: the series file and the patches it names, as read from disk."""

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
    for number, line in enumerate(series_file.read_text().splitlines(), 1):
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
    for entry in series.entries:
        if not series.patch_path(entry).is_file():
            raise SeriesError(
                f"{series_file} names {entry.patch}, but "
                f"{series.patch_path(entry)} does not exist"
            )
    return series
