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
  (harness.scratch) and renamed into place when every patch applied;
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
import re
import shutil
import tempfile
import textwrap
from pathlib import Path

from harness import cache, processes, scratch
from harness.errors import OutputError, SeriesError, excerpt
from harness.log import progress, warning
from harness.series.model import Series, SeriesEntry, load_series
from harness.series.snapshot import CheckoutFiles, read_states
from harness.targets import GitSource, SdistSource, Target
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
    """A patched copy of the pristine tree at dest, which must not exist yet."""
    series = load_series(target, tier)
    applier = choose_applier(series)
    _check_new_destination(dest)
    pristine = pristine_tree(target)
    if dest.resolve().is_relative_to(pristine.resolve()):
        raise OutputError(
            f"{dest} is inside the pristine tree {pristine} of target "
            f"{target.name}, which would be copied into itself; choose a "
            f"destination outside it"
        )
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with scratch.directory(dest.parent, "apply") as work:
            tree = work / "tree"
            progress(f"copying the pristine tree of {target.name} ({pristine})")
            shutil.copytree(pristine, tree, symlinks=True)
            read_states(tree, series.touched_paths())  # regular files only
            apply_series(tree, series, applier)
            _move_into_place(tree, dest)
    except OSError as exc:
        raise OutputError(
            f"cannot build the patched tree at {dest}: {_why(exc)}"
        ) from None
    progress(f"{len(series.entries)} patch(es) of tier {tier} applied: {dest}")
    return dest


def _check_new_destination(dest: Path) -> None:
    if dest.is_symlink():
        raise OutputError(
            f"{dest} is a symlink (to {os.readlink(dest)}); give a path that does "
            f"not exist yet"
        )
    if dest.exists():
        raise OutputError(f"{dest} already exists; remove it or choose another")
    if (blocking := scratch.blocking_file(dest)) is not None:
        raise OutputError(f"cannot make {dest}: {blocking} is not a directory")
    try:
        dest.resolve()
    except (RuntimeError, OSError) as exc:  # a symlink loop (3.11: RuntimeError)
        raise OutputError(f"cannot make {dest}: {exc}") from None


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
            build_patched_tree(target, tier, tree)
    return tree


# --------------------------------------------------------------------------
# Onto a checkout
# --------------------------------------------------------------------------


def apply_onto(target: Target, tier: str, checkout: Path) -> None:
    """Apply the series onto a clean git checkout, all or nothing: to a
    scratch copy of the files it touches first, then, once every patch
    applied, the changed files written into the checkout."""
    series = load_series(target, tier)
    applier = choose_applier(series)
    processes.require_program("git", "--onto reads the checkout with it")
    top = _git(checkout, "rev-parse", "--show-toplevel")
    if top is None or Path(top.strip()).resolve() != checkout.resolve():
        raise SeriesError(
            f"{checkout} is not the top of a git checkout; --onto needs one so "
            f"that it can check that nothing is left uncommitted"
        )
    check_checkout_version(target, checkout)
    if (checkout / ".pc").exists():
        raise SeriesError(f"{checkout / '.pc'} exists (a quilt stack); pop it first")
    status = _git(checkout, "status", "--porcelain")
    if status:
        changed = "; ".join(status.splitlines()[:3])
        raise SeriesError(
            f"{checkout} has uncommitted changes ({changed}); commit or stash "
            f"them first"
        )
    files = CheckoutFiles(checkout, series.touched_paths())
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
    changed = files.install(after)
    progress(
        f"{len(series.entries)} patch(es) of tier {tier} applied onto {checkout} "
        f"({len(changed)} file(s) changed)"
    )


# --------------------------------------------------------------------------
# Which vLLM a checkout is
# --------------------------------------------------------------------------

_VERSION_ASSIGNMENT = re.compile(
    r"^__version__\s*=\s*(?:version\s*=\s*)?['\"]([^'\"]+)['\"]", re.MULTILINE
)


def checkout_version(checkout: Path) -> tuple[str, str] | None:
    """(version, how it was found) of the vLLM a checkout holds, or None: the
    nearest v* tag before HEAD, else vllm/_version.py, else PKG-INFO."""
    tag = (
        _git(checkout, "describe", "--tags", "--abbrev=0", "--match", "v[0-9]*") or ""
    ).strip()
    if tag:
        since = (_git(checkout, "rev-list", "--count", f"{tag}..HEAD") or "0").strip()
        after = f", {since} commit(s) after it" if since != "0" else ""
        return tag.removeprefix("v"), f"tag {tag}{after}"
    version_file = checkout / "vllm" / "_version.py"
    if version_file.is_file():
        match = _VERSION_ASSIGNMENT.search(version_file.read_text(errors="replace"))
        if match:
            return match[1], "vllm/_version.py"
    pkg_info = checkout / "PKG-INFO"
    if pkg_info.is_file():
        match = re.search(
            r"^Version: (\S+)", pkg_info.read_text(errors="replace"), re.M
        )
        if match:
            return match[1], "PKG-INFO"
    return None


def check_checkout_version(target: Target, checkout: Path) -> None:
    """Refuse a checkout of another vLLM than the target's, naming the one
    found; an unknown version is a warning (the apply restores on failure)."""
    if isinstance(target.source, GitSource):
        _check_descends(target, target.source, checkout)
    elif isinstance(target.source, SdistSource):
        _check_release(target, target.source, checkout)


def _check_descends(target: Target, source: GitSource, checkout: Path) -> None:
    ancestry = ("merge-base", "--is-ancestor", source.commit, "HEAD")
    result = _git_run(checkout, *ancestry)
    if result.returncode == 1:
        raise SeriesError(
            f"{checkout}: HEAD does not descend from commit {source.commit}, the "
            f"source of target {target.name}; check out a branch based on it"
        )
    if result.returncode != 0:
        warning(
            f"cannot tell whether {checkout} holds commit {source.commit} of target "
            f"{target.name} (not in this repository); applying anyway"
        )


def _check_release(target: Target, source: SdistSource, checkout: Path) -> None:
    found = checkout_version(checkout)
    if found is None:
        warning(
            f"cannot tell which vLLM {checkout} is (no v* tag before HEAD, no "
            f"vllm/_version.py, no PKG-INFO); applying the series of vLLM "
            f"{source.version} anyway"
        )
        return
    version, how = found
    if version != source.version:
        raise SeriesError(
            f"{checkout} is vLLM {version} ({how}), but target {target.name} is "
            f"vLLM {source.version}; check out v{source.version}, or use the target "
            f"of {version} if there is one (python -m harness targets)"
        )
    progress(f"{checkout} is vLLM {version} ({how})")


# Where git would look for a repository other than the checkout --onto names.
REPOSITORY_VARIABLES = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
)


def _git_run(checkout: Path, *args: str):
    """git on the checkout itself, whatever GIT_DIR and the like say (and,
    as every child, with no optional lock: harness.processes)."""
    env = {k: v for k, v in os.environ.items() if k not in REPOSITORY_VARIABLES}
    return processes.run(["git", "-C", str(checkout), *args], env=env)


def _git(checkout: Path, *args: str) -> str | None:
    result = _git_run(checkout, *args)
    return result.stdout if result.returncode == 0 else None
