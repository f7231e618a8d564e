"""The series lint (`python -m harness lint [--root DIR]`, run by pre-commit).

For every patches directory that harness/targets.toml names (patches/ and
patches/vX.Y/):

- every patch a series file lists exists, and every *.patch file of the
  directory is listed in one of its series files;
- every listed patch has the form harness.series.patch_form checks: a mail
  that `git am --keep-non-patch` takes, in quilt's refreshed form;
- no patch has CRLF line endings (quilt applies those, git apply does not),
  and no series file is empty;
- no patch names a path outside the tree, inside `.git/` or `.pc/`, a
  symlink, or a binary or context diff, and no series entry a patch outside
  its directory (harness.series.model refuses them when a series is
  applied: the lint says so without a cached tree);
- whenever the target's pristine tree can be had without a download (it is
  in the harness cache, or its cached sdist is unpacked; the lint never
  downloads), the series is applied with `git apply` (no fuzz) to a scratch
  copy of the files it touches, and a patch that does not apply is an
  error; what was skipped for want of a tree is said, in the notes and in
  the closing line. `ruff check` and `ruff format` then read each patched Python file on
  stdin as if it were that file of the cached tree, so vLLM's own
  configuration (the tree's pyproject.toml), excludes and first-party packages
  apply, and nothing is written to the cache. Only what the series introduces
  is reported: findings already present in the pristine files are left out,
  since vLLM pins an older ruff than the one this project runs;
- README.md and main's description name the release main pins
  (harness.series.readme_pins).

Every error names the file, and the line where there is one. A series file
that targets.toml names but that does not exist yet is noted, not an error
(targets.toml reports it when the tier is applied).
"""

import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from harness import scratch as scratch_space
from harness.checkout import PIN_FILE
from harness.errors import SeriesError, SourceError
from harness.series.apply import GitApplier
from harness.series.model import Series, crlf_error, read_series
from harness.series.patch_form import check_patch
from harness.series.patch_paths import read_patch
from harness.series.readme_pins import main_release_errors
from harness.targets import Target, load_targets
from harness.trees.sources import cached_pristine_tree


@dataclass
class Findings:
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    patches: int = 0  # patch files checked
    applied: int = 0  # series applied without fuzz to a pristine tree
    ruff_runs: int = 0  # series linted with ruff on a cached tree
    skipped: list[str] = field(default_factory=list)  # series not applied


@dataclass
class PatchesDir:
    """A patches directory and the series files and targets that use it."""

    path: Path
    series_names: set[str] = field(default_factory=set)
    targets: list[Target] = field(default_factory=list)


# --------------------------------------------------------------------------
# The directories targets.toml names
# --------------------------------------------------------------------------


def patches_dirs(root: Path) -> list[PatchesDir]:
    targets = load_targets(root / PIN_FILE)
    found: dict[Path, PatchesDir] = {}
    for target in targets.values():
        entry = found.setdefault(target.patches_dir, PatchesDir(target.patches_dir))
        entry.series_names.update(target.series.values())
        entry.targets.append(target)
    return list(found.values())


def lint_directory(
    root: Path, directory: PatchesDir, findings: Findings
) -> dict[str, tuple[Series, dict[str, list[str]]]]:
    """Check one patches directory; return its applicable series, each with
    the files it touches (path -> patches touching it)."""
    shown_dir = _shown(root, directory.path)
    if not directory.path.is_dir():
        findings.notes.append(f"{shown_dir}/ does not exist yet")
        return {}
    listed: set[str] = set()
    checked: dict[str, list[str]] = {}
    usable = {}
    for name in sorted(directory.series_names):
        series_file = directory.path / name
        shown_series = _shown(root, series_file)
        if not series_file.is_file():
            findings.notes.append(f"{shown_series} does not exist yet")
            continue
        try:
            entries = read_series(series_file)
        except SeriesError as exc:
            findings.errors.append(str(exc))
            continue
        if not entries:
            findings.errors.append(f"{shown_series}: lists no patch")
            continue
        complete = True
        touched: dict[str, list[str]] = defaultdict(list)
        for entry in entries:
            listed.add(entry.patch)
            patch = directory.path / entry.patch
            if not patch.is_file():
                number = _series_line(series_file, entry.patch)
                findings.errors.append(
                    f"{shown_series}:{number}: names {entry.patch}, which does not "
                    f"exist"
                )
                complete = False
                continue
            if entry.patch not in checked:
                errors, checked[entry.patch] = check_patch(
                    patch, _shown(root, patch), entry.strip
                )
                if crlf := crlf_error(patch):
                    errors.append(crlf.replace(str(patch), _shown(root, patch), 1))
                if not patch.resolve().is_relative_to(directory.path.resolve()):
                    errors.append(
                        f"{_shown(root, patch)}: a link to {patch.resolve()}, "
                        f"outside {shown_dir}/"
                    )
                errors += [
                    f"{_shown(root, patch)}:{number}: {reason}"
                    for number, reason in read_patch(
                        patch.read_bytes(), entry.strip
                    ).problems
                ]
                findings.errors += errors
                findings.patches += 1
            for file in checked[entry.patch]:
                touched[file].append(entry.patch)
        if complete:
            series = Series(directory.path, series_file, entries)
            usable[name] = (series, dict(touched))
    names = ", ".join(sorted(directory.series_names))
    for orphan in sorted(directory.path.glob("*.patch")):
        if orphan.name not in listed:
            findings.errors.append(
                f"{_shown(root, orphan)}: not listed in any series file of "
                f"{shown_dir}/ ({names})"
            )
    return usable


def _series_line(series_file: Path, patch: str) -> int:
    for number, line in enumerate(series_file.read_text().splitlines(), 1):
        if line.split("#", 1)[0].split()[:1] == [patch]:
            return number
    return 1


def _shown(root: Path, path: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


# --------------------------------------------------------------------------
# ruff under vLLM's configuration
# --------------------------------------------------------------------------


def ruff_command() -> list[str] | None:
    if found := shutil.which("ruff"):
        return [found]
    probe = subprocess.run(
        [sys.executable, "-m", "ruff", "--version"], capture_output=True
    )
    return [sys.executable, "-m", "ruff"] if probe.returncode == 0 else None


def ruff_output(ruff: list[str], tree: Path, args: list[str], path: str, text: str):
    """ruff on text as if it were tree/path: the tree's own configuration,
    excludes and first-party packages apply, and nothing is written there."""
    result = subprocess.run(
        [*ruff, *args, "--no-cache", "--force-exclude", "--stdin-filename", path, "-"],
        input=text,
        cwd=tree,
        capture_output=True,
        text=True,
    )
    if result.returncode not in (0, 1):
        reason = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise SeriesError(
            f"ruff {args[0]} on {path} exited {result.returncode}: {reason}"
        )
    return result.stdout


def ruff_findings(ruff: list[str], tree: Path, path: str, text: str) -> list:
    """(place, message, tool) for what ruff check and ruff format find."""
    findings = []
    check = ["check", "--output-format=concise", "--quiet"]
    for line in ruff_output(ruff, tree, check, path, text).splitlines():
        if match := re.match(r"^.+?:(\d+:\d+): (.*)$", line):
            findings.append((match[1], match[2], "ruff check"))
    # One finding per run of changed lines in ruff format's diff, placed at
    # the line of the input (the diff's old side) where the run starts.
    row, in_run = None, False
    for line in ruff_output(ruff, tree, ["format", "--diff"], path, text).splitlines():
        if match := re.match(r"^@@ -(\d+)", line):
            row, in_run = int(match[1]), False
        elif row is None:
            continue
        elif line[:1] in ("-", "+"):
            if not in_run:
                verb = "change" if line[0] == "-" else "insert"
                message = f"would {verb} {line[1:].strip()!r}"
                findings.append((str(row), message, "ruff format"))
            in_run = True
            row += line[0] == "-"
        else:
            row, in_run = row + 1, False
    return findings


def patched_files(tree: Path, series: Series, files: list[str]) -> dict[str, str]:
    """The series applied (git apply, no fuzz) to a scratch copy of the files
    it touches: file -> patched text, for those of files that remain."""
    with scratch_space.directory(Path(tempfile.gettempdir()), "lint") as scratch:
        for file in files:
            if (tree / file).is_file():
                (scratch / file).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(tree / file, scratch / file)
        applier = GitApplier(series)
        for entry in series.entries:
            failure = applier.push(scratch, entry)
            if failure is not None:
                reason = (failure.strip().splitlines() or ["no output"])[0]
                raise SeriesError(
                    f"{entry.patch} does not apply to the cached pristine tree "
                    f"{tree} (no fuzz): {reason}"
                )
        patched = {}
        for file in files:
            if (scratch / file).is_file():
                data = (scratch / file).read_bytes()
                try:
                    patched[file] = data.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise SeriesError(
                        f"{file} is not UTF-8 once patched (byte "
                        f"0x{data[exc.start]:02x} at offset {exc.start})"
                    ) from None
        return patched


def ruff_series(
    ruff: list[str], tree: Path, patched: dict[str, str], touched: dict, shown: str
) -> list[str]:
    """What ruff finds in the patched Python files and not before the series."""
    errors = []
    for file, text in sorted(patched.items()):
        if not file.endswith((".py", ".pyi")):
            continue
        pristine = (tree / file).read_text() if (tree / file).is_file() else ""
        before = ruff_findings(ruff, tree, file, pristine)
        after = ruff_findings(ruff, tree, file, text)
        for place, message, tool in introduced(before, after):
            errors.append(
                f"{shown}: {file}:{place}: {message} ({tool} under vLLM's "
                f"configuration, after {', '.join(touched[file])})"
            )
    return errors


def introduced(before: list, after: list) -> list:
    """The findings of after whose (message, tool) occurs more often than in
    before; line numbers move when a patch applies, so they are not compared."""
    counts_before = Counter((message, tool) for _, message, tool in before)
    counts_after = Counter((message, tool) for _, message, tool in after)
    return [
        (place, message, tool)
        for place, message, tool in after
        if counts_after[message, tool] > counts_before[message, tool]
    ]


# --------------------------------------------------------------------------
# Everything
# --------------------------------------------------------------------------


def lint(root: Path) -> Findings:
    findings = Findings()
    findings.errors += main_release_errors(root, load_targets(root / PIN_FILE))
    ruff = ruff_command()
    for directory in patches_dirs(root):
        usable = lint_directory(root, directory, findings)
        for name, (series, touched) in sorted(usable.items()):
            shown = _shown(root, series.series_file)
            users = [t for t in directory.targets if name in t.series.values()]
            trees = _pristine_trees(users, shown, findings)
            for tree in sorted(trees):
                try:
                    patched = patched_files(tree, series, sorted(touched))
                    findings.applied += 1
                    if ruff is not None:
                        findings.ruff_runs += 1
                        findings.errors += ruff_series(
                            ruff, tree, patched, touched, shown
                        )
                except SeriesError as exc:
                    findings.errors.append(f"{shown}: {exc}")
    if ruff is None:
        findings.notes.append("ruff skipped: ruff is not installed")
    return findings


def _pristine_trees(users: list[Target], shown: str, findings: Findings) -> set:
    """The pristine trees of the targets using a series that can be had
    without a download; the series is noted as skipped if there is none."""
    trees, missing = set(), []
    for target in users:
        try:
            tree = cached_pristine_tree(target)
        except SourceError as exc:
            findings.notes.append(f"{shown}: target {target.name}: {exc}")
            tree = None
        if tree is None:
            missing.append(target.name)
        else:
            trees.add(tree)
    if not trees:
        findings.skipped.append(shown)
        findings.notes.append(
            f"{shown}: no-fuzz apply check and ruff skipped: no pristine tree of "
            f"target(s) {', '.join(missing)} in the cache (`python -m harness "
            f"fetch --target T` caches one)"
        )
    return trees
