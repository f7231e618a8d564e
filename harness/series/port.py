"""`port`: carry one tier of a target's series onto another target's release.

A hand port each release does not scale (the series is kept for every
target), and `patch` without fuzz rejects a hunk as soon as a line of its
context moved. So each patch is carried by a three-way merge whose base is
the --from target's pristine tree (harness.series.port_repo): the merge
takes the patch's change wherever the new release left the lines it changes
alone, and stops only where both changed the same lines. Each merged result
is written as a patch in quilt's refreshed form with the original's mail
byte for byte (harness.series.port_diff).

Only a whole port is written: the ported series is built in scratch space
beside --out (a new folder in the temporary directory without one), applied
without fuzz to a scratch copy of the --to target's pristine files with the
harness's own apply machinery, and renamed into place. On a conflict
nothing is written to --out; the merge's git repository is moved out of
scratch space and kept for the user, its path said at once. Nothing is ever
written into a patches directory that harness/targets.toml names, nor into
the harness cache.
"""

import os
import secrets
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from harness import cache, processes, scratch
from harness.errors import CacheError, OutputError, SeriesError
from harness.log import progress
from harness.series.apply import apply_series, check_creations, choose_applier
from harness.series.model import Series, load_series, patch_error
from harness.series.port_diff import diff_part, file_diff, file_order, mail_header
from harness.series.port_repo import Conflict, MergeRepo, write_states
from harness.series.snapshot import read_states
from harness.targets import SdistSource, Target, load_targets
from harness.trees.sources import pristine_tree

# How each patch came across, by kind.
HOW = {
    "as-is": "as it was: the same diff applies",
    "offsets": "applies as it was at other lines; written with the new line numbers",
    "merged": "three-way merge: it does not apply as it was (no fuzz), the merge "
    "carried it",
    "conflict": "CONFLICT",
    "empty": "needs hands: the merge changes nothing ({release} has the change "
    "already)",
    "not-tried": "not tried: it goes on top of {before}",
}
FAILED = ("conflict", "empty")


@dataclass
class Outcome:
    patch: str
    kind: str = ""  # a key of HOW
    conflicts: list[Conflict] = field(default_factory=list)
    # Files the patch changes whose change the release has already (left out).
    left_out: list[str] = field(default_factory=list)
    before: str = ""  # the failed patch a "not-tried" one goes on top of

    def describe(self, release: str) -> str:
        return HOW[self.kind].format(release=release, before=self.before)


@dataclass
class PortResult:
    series_name: str
    release: str  # the --to side in words
    outcomes: list[Outcome]
    out: Path | None = None  # the ported series, when every patch merged
    kept: Path | None = None  # the merge repository, kept on a conflict
    # Where the patches after a conflicting one start on `from`, if any.
    rest: str | None = None


def release_name(target: Target) -> str:
    if isinstance(target.source, SdistSource):
        return f"vLLM {target.source.version}"
    return f"target {target.name}'s tree"


def port(source: Target, dest: Target, tier: str, out: Path | None) -> PortResult:
    """Port ``tier`` of ``source``'s series onto ``dest``'s pristine tree."""
    series = load_series(source, tier)
    for entry in series.entries:
        if entry.strip != 1:
            raise SeriesError(
                f"{series.series_file}: {entry.patch} is applied with -p{entry.strip}; "
                f"port writes quilt's a/ b/ form (-p1), so it carries -p1 patches only"
            )
    check_out(out)
    processes.require_program("git", "port merges the series with it")
    processes.require_program("diff", "port writes each diff with it, as quilt does")
    paths = sorted(series.touched_paths())
    base = read_states(pristine_tree(source), paths)
    other = read_states(pristine_tree(dest), paths)
    result = PortResult(series.series_file.name, release_name(dest), [])
    temporary = Path(tempfile.gettempdir())
    with scratch.directory(temporary, "port") as work:
        repo = MergeRepo(work / "merge", result.release)
        repo.create(base, other)
        commits = _commit_patches(repo, series, source)
        repo.git("checkout", "--quiet", "to")
        (work / "diff").mkdir()
        patches = _pick(repo, series, commits, paths, work / "diff", result)
        if any(outcome.kind in FAILED for outcome in result.outcomes):
            result.kept = _keep(repo, source, dest, tier, temporary)
            return result
    result.out = _write_out(series, patches, dest, out, f"{source.name}-to-{dest.name}")
    return result


def check_out(out: Path | None) -> None:
    """Refuse, before any work, an --out that is or lies in a patches
    directory of targets.toml or the harness cache, or that is not a new
    or empty directory in a writable one."""
    if out is None:
        return
    try:
        resolved = out.resolve()
    except (RuntimeError, OSError) as exc:  # a symlink loop (3.11: RuntimeError)
        raise OutputError(f"--out {out}: {exc}") from None
    for target in load_targets().values():
        patches = target.patches_dir.resolve()
        if resolved.is_relative_to(patches):
            where = "is" if resolved == patches else "is inside"
            raise OutputError(
                f"--out {out} {where} {patches}, the patches directory of target "
                f"{target.name}; port writes elsewhere, copy the series in once "
                f"you have read it"
            )
    try:
        in_cache = resolved.is_relative_to(cache.root())
    except CacheError:
        in_cache = False
    if in_cache:
        raise OutputError(
            f"--out {out} is inside the harness cache {cache.root()}, which no "
            f"verb writes its output into; give a path outside it"
        )
    if out.is_symlink():
        raise OutputError(f"--out {out} is a symlink; give a new or empty directory")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        kind = "not empty" if out.is_dir() else "not a directory"
        raise OutputError(f"--out {out} is {kind}; give a new or empty directory")
    parent = out.absolute().parent
    if not parent.is_dir():
        raise OutputError(f"--out {out}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"--out {out}: {parent} is not writable")


def _commit_patches(repo: MergeRepo, series: Series, source: Target) -> list[str]:
    """Each patch applied to the --from side in turn and committed there."""
    commits = []
    count = len(series.entries)
    for number, entry in enumerate(series.entries, 1):
        progress(
            f"[{number}/{count}] {entry.patch}: applying it to target "
            f"{source.name}'s files (the merge's base)"
        )
        commit = repo.commit_patch(series.patch_path(entry), entry.strip, entry.patch)
        if commit is None:
            raise SeriesError(
                f"{series.patch_path(entry)} does not apply without fuzz to target "
                f"{source.name}'s pristine tree after the patches before it; "
                f"`python -m harness lint` says more"
            )
        commits.append(commit)
    return commits


def _pick(
    repo: MergeRepo,
    series: Series,
    commits: list[str],
    paths: list[str],
    work: Path,
    result: PortResult,
) -> dict[str, bytes]:
    """Merge each patch onto the --to side in turn; the ported patches."""
    patches: dict[str, bytes] = {}
    count = len(series.entries)
    for number, (entry, commit) in enumerate(
        zip(series.entries, commits, strict=True), 1
    ):
        progress(
            f"[{number}/{count}] {entry.patch}: merging it onto "
            f"{result.release}'s files"
        )
        original = series.patch_path(entry).read_bytes()
        before = read_states(repo.path, paths)
        as_it_is = repo.applies(series.patch_path(entry), entry.strip)
        outcome = Outcome(entry.patch)
        result.outcomes.append(outcome)
        if conflicts := repo.pick(commit):
            outcome.kind, outcome.conflicts = "conflict", conflicts
        else:
            after = read_states(repo.path, paths)
            changed = [path for path in paths if before[path] != after[path]]
            named = series.patch_files(entry).paths
            outcome.left_out = [path for path in named if path not in changed]
            diff = b"".join(
                file_diff(path, before[path], after[path], work)
                for path in file_order(named, changed)
            )
            patches[entry.patch] = mail_header(original) + diff
            if not diff:
                outcome.kind = "empty"
            elif diff == diff_part(original):
                outcome.kind = "as-is"
            else:
                outcome.kind = "offsets" if as_it_is else "merged"
        if outcome.kind in FAILED:
            if number < count:
                result.rest = repo.rev(commit)
            for later in series.entries[number:]:
                result.outcomes.append(
                    Outcome(later.patch, "not-tried", before=entry.patch)
                )
            break
    return patches


def _keep(
    repo: MergeRepo, source: Target, dest: Target, tier: str, temporary: Path
) -> Path:
    """Move the merge repository out of scratch space, for the user; its path
    is said at once, so that a stop signal never leaves it unnamed."""
    prefix = f"vllm-port-{source.name}-to-{dest.name}-{tier}-merge-"
    with processes.stop_signals_held():
        kept = Path(tempfile.mkdtemp(dir=temporary, prefix=prefix))
        try:
            os.rename(repo.path, kept)
        except OSError as exc:
            kept.rmdir()
            raise OutputError(
                f"cannot keep the merge in {temporary}: {exc.strerror or exc}"
            ) from None
        progress(f"kept the merge for you in {kept} (rm -rf it when done)")
    return kept


def _write_out(
    series: Series, patches: dict[str, bytes], dest: Target, out: Path | None, name: str
) -> Path:
    """The ported series, checked to apply, renamed into place whole."""
    temporary = Path(tempfile.gettempdir())
    parent = out.absolute().parent if out is not None else temporary
    try:
        with scratch.directory(parent, "port-out") as staging:
            folder = staging / "series"
            folder.mkdir()
            for patch, data in patches.items():
                (folder / patch).parent.mkdir(parents=True, exist_ok=True)
                (folder / patch).write_bytes(data)
                os.chmod(folder / patch, 0o644)
            series_file = folder / series.series_file.name
            series_file.write_bytes(series.series_file.read_bytes())
            ported = Series(folder, series_file, series.entries)
            _check_applies(ported, dest, temporary)
            final = out or temporary / f"vllm-port-{name}-{secrets.token_hex(4)}"
            os.rename(folder, final)
    except OSError as exc:
        where = out or temporary
        raise OutputError(
            f"cannot write the ported series to {where}: {exc.strerror or exc}"
            f"{' (made by another run meanwhile?)' if out and out.exists() else ''}"
        ) from None
    return final


def _check_applies(ported: Series, dest: Target, temporary: Path) -> None:
    """The ported series applied in order, without fuzz, to a scratch copy
    of the --to target's pristine files, as `apply` applies a series."""
    for entry in ported.entries:
        if error := patch_error(ported, entry):
            raise SeriesError(f"the ported series is refused: {error}")
    progress(f"checking that it applies to target {dest.name}'s pristine files")
    paths = ported.touched_paths()
    states = read_states(pristine_tree(dest), paths)
    with scratch.directory(temporary, "port-check") as check:
        tree = check / "tree"
        tree.mkdir()
        write_states(tree, states)
        check_creations(ported, read_states(tree, paths))
        apply_series(tree, ported, choose_applier(ported))
