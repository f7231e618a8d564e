"""Apply a target's quilt series to a copy of its pristine tree, or onto a checkout.

With quilt on PATH each patch is pushed with `quilt push --fuzz=0` and quilt's
`.pc` bookkeeping is removed afterwards; without it (or with
HARNESS_APPLY_WITH=git) each patch goes through `git apply --check`, then
`git apply`, which never fuzzes. Both must give the same tree. A series either
applies whole or leaves nothing behind: a new tree is built next to its
destination and renamed into place, and a checkout gets the patches pushed so
far reversed.
"""

import hashlib
import os
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

from harness import cache
from harness.errors import SeriesError
from harness.log import progress
from harness.series.model import Series, SeriesEntry, load_series
from harness.targets import Target
from harness.trees.sources import pristine_tree


class QuiltApplier:
    name = "quilt"

    def __init__(self, series: Series):
        self.env = {
            **os.environ,
            "QUILT_PATCHES": str(series.patches_dir.resolve()),
            "QUILT_SERIES": str(series.series_file.resolve()),
        }

    def _quilt(self, tree: Path, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["quilt", "--quiltrc", "-", *args],
            cwd=tree,
            env=self.env,
            capture_output=True,
            text=True,
        )

    def push(self, tree: Path, entry: SeriesEntry) -> str | None:
        result = self._quilt(tree, "push", "--fuzz=0", entry.patch)
        return None if result.returncode == 0 else result.stdout + result.stderr

    def undo(self, tree: Path, pushed: list[SeriesEntry]) -> None:
        if pushed:
            result = self._quilt(tree, "pop", "-a", "-q")
            if result.returncode != 0:
                output = result.stdout + result.stderr
                raise SeriesError(f"quilt pop -a failed in {tree}:\n{output}")
        self.finish(tree)

    def finish(self, tree: Path) -> None:
        shutil.rmtree(tree / ".pc", ignore_errors=True)


class GitApplier:
    name = "git apply"

    def __init__(self, series: Series):
        self.series = series

    def _git_apply(self, tree: Path, entry: SeriesEntry, *options: str):
        # Stop git from taking an enclosing repository's root as the tree's.
        env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tree.resolve().parent)}
        command = ["git", "apply", f"-p{entry.strip}", "--whitespace=nowarn"]
        return subprocess.run(
            [*command, *options, str(self.series.patch_path(entry).resolve())],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
        )

    def push(self, tree: Path, entry: SeriesEntry) -> str | None:
        for options in (["--check"], []):
            result = self._git_apply(tree, entry, *options)
            if result.returncode != 0:
                return result.stderr
        return None

    def undo(self, tree: Path, pushed: list[SeriesEntry]) -> None:
        for entry in reversed(pushed):
            result = self._git_apply(tree, entry, "-R")
            if result.returncode != 0:
                raise SeriesError(
                    f"could not reverse {entry.patch} in {tree}:\n{result.stderr}"
                )

    def finish(self, tree: Path) -> None:
        pass


def choose_applier(series: Series) -> QuiltApplier | GitApplier:
    forced = os.environ.get("HARNESS_APPLY_WITH", "")
    if forced not in ("", "quilt", "git"):
        raise SeriesError(f"HARNESS_APPLY_WITH={forced} is neither quilt nor git")
    has_quilt = shutil.which("quilt") is not None
    if forced == "quilt" and not has_quilt:
        raise SeriesError("HARNESS_APPLY_WITH=quilt, but quilt is not on PATH")
    if forced == "quilt" or (not forced and has_quilt):
        return QuiltApplier(series)
    return GitApplier(series)


def apply_series(tree: Path, series: Series) -> None:
    """Apply every patch, or undo the ones applied and raise naming the failure."""
    applier = choose_applier(series)
    progress(f"applying {series.series_file} with {applier.name}")
    pushed: list[SeriesEntry] = []
    for number, entry in enumerate(series.entries, 1):
        progress(f"applying [{number}/{len(series.entries)}] {entry.patch}")
        failure = applier.push(tree, entry)
        if failure is not None:
            applier.undo(tree, pushed)
            detail = textwrap.indent(failure.strip(), "    ")
            raise SeriesError(
                f"patch {entry.patch} from {series.series_file} does not apply "
                f"({applier.name}, no fuzz):\n{detail}"
            )
        pushed.append(entry)
    applier.finish(tree)


def build_patched_tree(target: Target, tier: str, dest: Path) -> Path:
    """A patched copy of the pristine tree at dest, which must not exist yet."""
    series = load_series(target, tier)
    if dest.exists():
        raise SeriesError(f"{dest} already exists; remove it or choose another")
    pristine = pristine_tree(target)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".{dest.name}-") as work:
        tree = Path(work) / "tree"
        progress(f"copying the pristine tree of {target.name} ({pristine})")
        shutil.copytree(pristine, tree, symlinks=True)
        apply_series(tree, series)
        tree.rename(dest)
    progress(f"{len(series.entries)} patch(es) of tier {tier} applied: {dest}")
    return dest


def cached_patched_tree(target: Target, tier: str) -> Path:
    """The patched tree kept in the cache, keyed by source, series and patches.

    A local-path source can change under us, so its patched tree is rebuilt.
    """
    series = load_series(target, tier)
    identity = target.source.identity() or f"path-{target.source.path}"
    key = hashlib.sha256(f"{identity}\0{series.digest()}".encode()).hexdigest()
    tree = cache.patched_tree(f"{target.name}-{tier}-{key[:16]}")
    with cache.lock(tree.name):
        if tree.is_dir() and target.source.identity() is None:
            shutil.rmtree(tree)
        if not tree.is_dir():
            build_patched_tree(target, tier, tree)
    return tree


def apply_onto(target: Target, tier: str, checkout: Path) -> None:
    """Apply the series in place onto a clean git checkout, all or nothing."""
    series = load_series(target, tier)
    top = _git(checkout, "rev-parse", "--show-toplevel")
    if top is None or Path(top.strip()).resolve() != checkout.resolve():
        raise SeriesError(
            f"{checkout} is not the top of a git checkout; --onto needs one so "
            f"that it can check that nothing is left uncommitted"
        )
    if (checkout / ".pc").exists():
        raise SeriesError(f"{checkout / '.pc'} exists (a quilt stack); pop it first")
    status = _git(checkout, "status", "--porcelain")
    if status:
        changed = "; ".join(status.splitlines()[:3])
        raise SeriesError(
            f"{checkout} has uncommitted changes ({changed}); commit or stash "
            f"them first"
        )
    apply_series(checkout, series)
    progress(f"{len(series.entries)} patch(es) of tier {tier} applied onto {checkout}")


def _git(checkout: Path, *args: str) -> str | None:
    result = subprocess.run(
        ["git", "-C", str(checkout), *args], capture_output=True, text=True
    )
    return result.stdout if result.returncode == 0 else None
