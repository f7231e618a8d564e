"""A target's pristine tree as a new git checkout of its release: a fork
without GitHub (`fetch --target T --git DIR`).

`apply --onto` needs the top of a clean git checkout of the target's release,
which it recognises by its nearest ``v*`` tag. Where the release's repository
cannot be cloned, the pinned sdist is enough: its pristine tree (unpacked
once into the harness cache, harness.trees.sources) is copied into scratch
space beside DIR, committed on a branch ``main`` and tagged ``vX.Y.Z``, then
renamed into place whole, so DIR exists only once it is that checkout.

The commit is made as export's scratch repository makes its base commit
(harness.submission.commits): every file (``--force``, past the tree's own
.gitignore), the same fixed identity, date and message, and none of the
user's git configuration; so it is the same commit on every machine (one
that exists nowhere upstream: export's mails name the release and the
commit id its sdist records instead, harness.submission.base). The tag is a lightweight
one, which needs no identity. Files are copied writable by their owner: the
copy is the user's to edit.
"""

import os
import shutil
import stat
from pathlib import Path

from harness import cache, processes, scratch
from harness.errors import MissingDependency, OutputError, SourceError, TargetError
from harness.log import progress
from harness.targets import SdistSource, Target

# The identity and date of the commit, and its branch: export's base commit's.
IDENTITY = ("vllm-kv-series export", "export@localhost")
COMMIT_DATE = "2000-01-01T00:00:00+0000"
BRANCH = "main"
# Variables that would point git at another repository than DIR (also what
# `apply --onto` leaves out of the environment of git in a checkout).
REPOSITORY_VARIABLES = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
)


def tag_of(source: SdistSource) -> str:
    return f"v{source.version}"


def commit_message(target: Target) -> str:
    return (
        f"{target.source.release_name()} pristine\n\n"
        f"Unpacked from {target.source.describe()}.\n"
    )


def check_destination(target: Target, dest: Path) -> None:
    """Refuse, before any work, what `release_checkout` cannot make."""
    if not isinstance(target.source, SdistSource):
        raise TargetError(
            f"target {target.name}'s source is {target.source.describe()}, not "
            f"a release's sdist; --git makes a checkout of a release: clone or "
            f"copy that source instead"
        )
    cache.outside_trees(dest, "--git")
    if os.path.lexists(dest):
        raise OutputError(f"{dest} already exists; give a path that does not")
    if not dest.parent.is_dir():
        raise OutputError(f"cannot make {dest}: {dest.parent} is not a directory")
    if shutil.which("git") is None:
        raise MissingDependency("git is not on PATH; --git commits the tree with it")


def release_checkout(target: Target, pristine: Path, dest: Path) -> str:
    """A git checkout of the pristine tree at dest (new), its release tagged;
    returns the commit id."""
    check_destination(target, dest)
    with scratch.directory(dest.parent, "git-release") as building:
        tree = building / dest.name
        progress(f"copying the pristine tree of {target.name} ({pristine})")
        try:
            cache.copy_tree(pristine, tree)
            _owner_writable(tree)
        except OSError as exc:  # shutil.Error too: a disk that fills up, say
            raise OutputError(
                f"cannot copy the pristine tree to {dest}: {exc}"
            ) from None
        commit = _commit(target, tree)
        if os.path.lexists(dest):
            raise OutputError(
                f"{dest} was made by another run while this one worked; left it "
                f"as it is"
            )
        try:
            tree.rename(dest)
        except OSError as exc:
            raise OutputError(f"cannot make {dest}: {exc.strerror or exc}") from None
    return commit


def _owner_writable(tree: Path) -> None:
    for folder, _, files in os.walk(tree):
        for path in (folder, *(os.path.join(folder, name) for name in files)):
            info = os.lstat(path)
            if not stat.S_ISLNK(info.st_mode):
                os.chmod(path, stat.S_IMODE(info.st_mode) | stat.S_IWUSR)


def _commit(target: Target, tree: Path) -> str:
    progress(
        f"committing it as {target.source.release_name()}, tag {tag_of(target.source)}"
    )
    git(tree, "init", "--quiet", f"--initial-branch={BRANCH}")
    git(tree, "add", "--all", "--force", ".")
    git(tree, "commit", "--quiet", "--no-verify", "-m", commit_message(target))
    git(tree, "tag", tag_of(target.source))
    return git(tree, "rev-parse", "HEAD").strip()


def git(tree: Path, *args: str) -> str:
    """git in tree with the fixed identity and date and none of the user's
    configuration; its stdout."""
    name, email = IDENTITY
    env = {k: v for k, v in os.environ.items() if k not in REPOSITORY_VARIABLES}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CEILING_DIRECTORIES=str(tree.parent),
        GIT_AUTHOR_DATE=COMMIT_DATE,
        GIT_COMMITTER_DATE=COMMIT_DATE,
    )
    command = ["git", "-c", f"user.name={name}", "-c", f"user.email={email}", *args]
    result = processes.run(command, cwd=tree, env=env)
    if result.returncode != 0:
        said = (result.stderr or result.stdout).strip().splitlines() or ["no output"]
        raise SourceError(f"git {args[0]} failed in {tree}: {said[-1]}")
    return result.stdout
