"""Apply a target's quilt series to a copy of its pristine tree, or onto a checkout.

With quilt on PATH each patch is pushed with `quilt push --fuzz=0` and quilt's
`.pc` bookkeeping is removed afterwards; without it (or with
HARNESS_APPLY_WITH=git) each patch goes through `git apply --check`, then
`git apply`, which never fuzzes. Both must give the same tree, so each runs
in an environment of the harness's making, never the user's settings for
the tool: quilt reads no quiltrc and none of the QUILT_* or patch(1)
variables but those set here (QUILT_PC among them, so `.pc` is where the
harness removes it; patch is told the input is a unified diff), and git apply
reads no git configuration or GIT_* variable, and runs outside any
repository, so no .gitattributes converts line endings for one tool only.
What the series itself could do differently under the two tools is refused
when it is loaded (harness.series.model).

A series applies whole or leaves nothing behind, on a failing patch and on a
stop signal alike (harness.processes raises those as exceptions, and ends
quilt or git with their children first):

- a new tree is built in scratch space beside its destination
  (harness.scratch) and renamed into place when every patch applied; the
  folders made to hold it are removed again if it is not;
- onto a checkout, the series is applied to a scratch copy of the files it
  touches, outside the checkout; only once every patch applied are the
  changed files written into the checkout (harness.series.snapshot), and
  nothing else there is ever touched.

A patch reaches only regular files of the tree, through no symlink: a path
the tree holds as a symlink, a directory or a special file is refused.
What can be checked before any work is checked first: the apply method, the
destination, and the version of a checkout.
"""

import hashlib
import os
import shutil
import tempfile
import textwrap
from pathlib import Path

from harness import cache, processes, scratch
from harness.errors import OutputError, SeriesError, excerpt
from harness.log import progress
from harness.series.checkout_version import (
    check_checkout_version,
    git,
    refuse_series_commits,
    refuse_uncommitted,
)
from harness.series.model import Series, SeriesEntry, load_series
from harness.series.snapshot import CheckoutFiles, read_states
from harness.targets import Target
from harness.trees.sources import pristine_tree

# What patch(1) reads from the environment beside quilt's own QUILT_*.
PATCH_ENVIRONMENT = (
    "POSIXLY_CORRECT",
    "PATCH_GET",
    "PATCH_VERSION_CONTROL",
    "VERSION_CONTROL",
    "SIMPLE_BACKUP_SUFFIX",
)


class QuiltApplier:
    name = "quilt"

    def __init__(self, series: Series):
        self.env = {
            **{
                name: value
                for name, value in os.environ.items()
                if not name.startswith("QUILT") and name not in PATCH_ENVIRONMENT
            },
            "QUILT_PATCHES": str(series.patches_dir.resolve()),
            "QUILT_SERIES": str(series.series_file.resolve()),
            "QUILT_PC": ".pc",
            "QUILT_PATCH_OPTS": "--unified",
        }

    def push(self, tree: Path, entry: SeriesEntry) -> str | None:
        result = processes.run(
            ["quilt", "--quiltrc", "-", "push", "--fuzz=0", entry.patch],
            cwd=tree,
            env=self.env,
        )
        return None if result.returncode == 0 else result.stdout + result.stderr

    def finish(self, tree: Path) -> None:
        shutil.rmtree(tree / ".pc", ignore_errors=True)


class GitApplier:
    name = "git apply"

    def __init__(self, series: Series):
        self.series = series

    def _git_apply(self, tree: Path, entry: SeriesEntry, *options: str):
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
            # Outside any repository: no enclosing one's root, attributes or
            # configuration; and none of the user's or the system's either.
            "GIT_CEILING_DIRECTORIES": str(tree.resolve().parent),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
        }
        command = ["git", "apply", f"-p{entry.strip}", "--whitespace=nowarn"]
        patch = str(self.series.patch_path(entry).resolve())
        return processes.run([*command, *options, patch], cwd=tree, env=env)

    def push(self, tree: Path, entry: SeriesEntry) -> str | None:
        for options in (["--check"], []):
            result = self._git_apply(tree, entry, *options)
            if result.returncode != 0:
                return result.stderr
        return None

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


def check_creations(series: Series, states: dict) -> None:
    """Refuse a patch that creates a file the tree holds at that point of the
    series: quilt writes into it (into an empty one, cleanly), git apply
    refuses it."""
    present = {path for path, state in states.items() if state is not None}
    for entry in series.entries:
        files = series.patch_files(entry)
        present.difference_update(files.deleted)
        for path in files.created:
            if path in present:
                raise SeriesError(
                    f"{series.patch_path(entry)} creates {path}, which the tree "
                    f"already has there: quilt would write into it and git apply "
                    f"refuses it; the patch must modify it instead"
                )
            present.add(path)


def apply_series(tree: Path, series: Series, applier) -> None:
    """Push every patch; raise naming the first that does not apply (the
    caller puts the tree back)."""
    progress(f"applying {series.series_file} with {applier.name}")
    for number, entry in enumerate(series.entries, 1):
        progress(f"applying [{number}/{len(series.entries)}] {entry.patch}")
        failure = applier.push(tree, entry)
        if failure is not None:
            detail = textwrap.indent(excerpt(failure.strip()), "    ")
            raise SeriesError(
                f"patch {entry.patch} from {series.series_file} does not apply "
                f"({applier.name}, no fuzz):\n{detail}"
            )
    applier.finish(tree)


# --------------------------------------------------------------------------
# A new patched tree
# --------------------------------------------------------------------------


def build_patched_tree(target: Target, tier: str, dest: Path) -> Path:
    """A patched copy of the pristine tree at dest, which must not exist yet
    and must lie outside the harness cache's trees."""
    dest = scratch.absolute(dest, "--dest")
    cache.outside_trees(dest, "--dest")
    return _build_patched_tree(target, tier, dest)


def _build_patched_tree(target: Target, tier: str, dest: Path) -> Path:
    series = load_series(target, tier)
    applier = choose_applier(series)
    scratch.new_path(dest, "--dest")
    pristine = pristine_tree(target)
    if cache.lies_in(dest, pristine):
        raise OutputError(
            f"{dest} is inside the pristine tree {pristine} of target "
            f"{target.name}, which would be copied into itself; choose a "
            f"destination outside it"
        )
    try:
        with (
            scratch.folders(dest.parent),
            scratch.directory(dest.parent, "apply") as work,
        ):
            tree = work / "tree"
            progress(f"copying the pristine tree of {target.name} ({pristine})")
            cache.copy_tree(pristine, tree)
            check_creations(series, read_states(tree, series.touched_paths()))
            apply_series(tree, series, applier)
            _move_into_place(tree, dest)
    except OSError as exc:
        raise OutputError(
            f"cannot build the patched tree at {dest}: {_why(exc)}"
        ) from None
    progress(f"{len(series.entries)} patch(es) of tier {tier} applied: {dest}")
    return dest


def _move_into_place(tree: Path, dest: Path) -> None:
    if dest.exists() or dest.is_symlink():
        raise OutputError(
            f"{dest} was made by another run while this one worked; left it as "
            f"it is (this run's tree is removed)"
        )
    try:
        tree.rename(dest)
    except OSError:
        if dest.exists():
            raise OutputError(
                f"{dest} was made by another run while this one worked; left it "
                f"as it is (this run's tree is removed)"
            ) from None
        raise


def _why(exc: OSError) -> str:
    """One line for an OSError, shutil.Error's list of failures included."""
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list):
        failures = exc.args[0]
        source, _, reason = failures[0]
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        return f"{source}: {reason}{more}"
    where = f": {exc.filename}" if exc.filename else ""
    return f"{exc.strerror or exc}{where}"


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
            _build_patched_tree(target, tier, tree)
    return tree


# --------------------------------------------------------------------------
# Onto a checkout
# --------------------------------------------------------------------------


def apply_onto(target: Target, tier: str, checkout: Path) -> None:
    """Apply the series onto a clean git checkout, all or nothing: to a
    scratch copy of the files it touches first, then, once every patch
    applied, the changed files written into the checkout."""
    cache.outside_trees(checkout, "--onto")
    series = load_series(target, tier)
    applier = choose_applier(series)
    processes.require_program("git", "--onto reads the checkout with it")
    top = git(checkout, "rev-parse", "--show-toplevel")
    if top is None or Path(top.strip()).resolve() != checkout.resolve():
        raise SeriesError(
            f"{checkout} is not the top of a git checkout; --onto needs one so "
            f"that it can check that nothing is left uncommitted"
        )
    check_checkout_version(target, checkout)
    refuse_series_commits(checkout, series, tier)
    if (checkout / ".pc").exists():
        raise SeriesError(f"{checkout / '.pc'} exists (a quilt stack); pop it first")
    refuse_uncommitted(checkout)
    files = CheckoutFiles(checkout, series.touched_paths())
    check_creations(series, files.before)
    temporary = Path(tempfile.gettempdir())
    try:
        with scratch.directory(temporary, "onto") as work:
            copy = work / "tree"
            files.copy_to(copy)
            try:
                apply_series(copy, series, applier)
            except SeriesError as exc:
                raise SeriesError(f"{exc}{files.line_ending_hint()}") from None
            after = files.states_in(copy)
    except OSError as exc:
        raise OutputError(
            f"cannot apply the series to a copy of the files it touches in "
            f"{temporary}: {_why(exc)}"
        ) from None
    files.install(
        after,
        lambda count: (
            f"{len(series.entries)} patch(es) of tier {tier} applied "
            f"onto {checkout} ({count} file(s) changed)"
        ),
    )
