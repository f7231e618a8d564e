"""A tier of the series on an installed vLLM, its receipt, and taking it off.

`install` writes a tier's patched files (harness.installed.overlay) over the
vllm package of a Python environment, `uninstall` puts the released ones
back, `status` says which is there. Before any file is written each one is
checked: the installed distribution must be the target's release, every file
must still be what its RECORD says the wheel installed (sha256) and what the
target's sdist holds, and neither the package nor what ``import vllm`` loads
may lie inside the harness cache, which nothing ever writes through.

The receipt lives with the distribution, in ``NAME.dist-info/kv-events-series/``:
``receipt.json`` (target, tier, release, and each file's pristine and patched
sha256), the pristine files themselves, and a copy of RECORD. Its files are
added to RECORD, so that ``pip uninstall`` (or a reinstall) removes them with
the package; `uninstall` needs neither the tier nor the sdist, and restores
RECORD byte for byte. The receipt is checked as data before anything in it
is trusted (harness.installed.receipt); one that RECORD lists but that is gone, or
files of vllm/ that differ from RECORD with no receipt at all, are refused:
nothing says what the released files were.

Nothing half-done: the receipt is made whole in scratch space and renamed
into place, each file is replaced by a rename, stop signals are held while
files change, and an install interrupted or failing at any point puts every
file, RECORD and the receipt back as they were before it ended; an uninstall
that cannot finish puts back what it had written, the series staying on with
its receipt. After a SIGKILL the receipt is there, and `status` and
`uninstall` take it from there.
"""

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

from harness import scratch
from harness.cache import this_run
from harness.errors import PackageError
from harness.installed.installed import (
    Located,
    check_recorded,
    check_release,
    locate,
)
from harness.installed.overlay import Overlay, digest
from harness.installed.package_files import (
    file_digest,
    read_file,
    read_record,
    record_line,
)
from harness.installed.receipt import (
    PRISTINE,
    RECEIPT,
    RECEIPT_DIR,
    RECEIPT_MAX_BYTES,
    RECORD_COPY,
    Receipt,
    file_states,
    read_receipt,
    receipt_dir,
    receipt_file,
    record_mismatches,
)
from harness.log import progress, shown
from harness.processes import stop_signals_held
from harness.targets import Target

RESTART = (
    "restart the engine for this to take effect: a running vLLM keeps the "
    "files it imported"
)


def check_source(located: Located, overlay: Overlay) -> None:
    """Each installed file is the one the target's sdist holds."""
    for path in overlay.files:
        where = located.package_file(path)
        if file_digest(where) != digest(overlay.pristine[path]):
            raise PackageError(
                f"{where} of {located.dist.describe()} is not the {path} of the "
                f"sdist vllm=={overlay.release}: that package is not built from "
                f"target {overlay.target}'s source"
            )


def _write_receipt(located: Located, receipt: Receipt, overlay: Overlay) -> None:
    """The receipt directory, made whole and renamed into place, then RECORD
    extended with its files."""
    dist, info = located.dist, located.dist.dist_info
    record = read_file(dist.record)
    with scratch.directory(info, "receipt") as work:
        (work / RECEIPT).write_text(json.dumps(receipt.as_json(), indent=1) + "\n")
        (work / RECORD_COPY).write_bytes(record)
        for path in overlay.files:
            (work / PRISTINE / path).parent.mkdir(parents=True, exist_ok=True)
            (work / PRISTINE / path).write_bytes(overlay.pristine[path])
        added = sorted(
            (work / name).relative_to(work).as_posix()
            for name in [RECEIPT, RECORD_COPY]
            + [f"{PRISTINE}/{path}" for path in overlay.files]
        )
        work.rename(receipt_dir(located))
    prefix = f"{info.name}/{RECEIPT_DIR}/"
    lines = "".join(record_line(prefix + name) for name in added)
    _replace_file(dist.record, record + lines.encode())


def _remove_receipt(located: Located) -> None:
    """RECORD put back from its copy, then the receipt directory removed."""
    copy = receipt_file(located, RECORD_COPY)
    if copy.is_file():
        _replace_file(located.dist.record, read_file(copy))
    if receipt_dir(located).exists():
        with scratch.directory(located.dist.dist_info, "receipt") as work:
            receipt_dir(located).rename(work / RECEIPT_DIR)


def _replace_file(path: Path, data: bytes) -> None:
    """Write ``path`` whole: a scratch file beside it, with its mode, renamed."""
    mode = path.stat().st_mode & 0o7777
    with scratch.replacing(path, "install") as sink:
        os.fchmod(sink.fileno(), mode)
        sink.write(data)


# --------------------------------------------------------------------------
# One installation at a time
# --------------------------------------------------------------------------

HOLDER = "holder"
_held: dict[Path, int] = {}  # .dist-info -> how many blocks of this run hold it


@contextmanager
def installation_lock(located: Located, shared: bool = False) -> Iterator[None]:
    """Hold the distribution's installation lock while the block runs: a
    flock on its .dist-info directory (which neither install nor uninstall
    replaces). `install` and `uninstall` hold it exclusively, and say who
    they are in a scratch note beside it; `status` holds it shared, so it
    never reads a package half-written. A run that finds it held says so,
    naming the holder, and waits. Held already by this run, it is taken
    again at no cost (a verb holds it around `install`, which holds it too)."""
    info = located.dist.dist_info
    if info in _held:
        _held[info] += 1
        try:
            yield
        finally:
            _held[info] -= 1
        return
    try:
        descriptor = os.open(info, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise PackageError(f"cannot open {info}: {exc.strerror}") from None
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    _held[info] = 1
    try:
        try:
            fcntl.flock(descriptor, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(
                f"waiting for {located.dist.describe()}, which another run is "
                f"installing or taking off ({_holder_of(info)})"
            )
            fcntl.flock(descriptor, mode)
        except OSError as exc:
            raise PackageError(f"cannot lock {info}: {exc.strerror}") from None
        if shared:
            yield
        else:
            with ExitStack() as notes:
                try:
                    note = notes.enter_context(scratch.directory(info, HOLDER))
                    (note / HOLDER).write_text(this_run() + "\n")
                except OSError as exc:
                    raise PackageError(
                        f"cannot write in {info}: {exc.strerror or exc}; the "
                        f"series is put on and taken off only where it can be"
                    ) from None
                yield
    finally:
        del _held[info]
        os.close(descriptor)  # the lock goes with it


def _holder_of(info: Path) -> str:
    """Who holds the lock, from the note it left (a status run leaves none)."""
    for note in info.glob(f"{scratch.PREFIX}{HOLDER}-*/{HOLDER}"):
        with suppress(OSError, ValueError, PackageError):
            return shown(read_file(note, 1000).decode("utf-8", "replace").strip())
    return "a status run, or one that has not said which"


# --------------------------------------------------------------------------
# Install, uninstall
# --------------------------------------------------------------------------


def install(located: Located, target: Target, overlay: Overlay) -> Receipt:
    """Put the overlay's patched files on the located package, with a receipt;
    all of it, or (on any error or stop signal) nothing. Under the
    installation lock."""
    with installation_lock(located):
        return _install(located, target, overlay)


def _install(located: Located, target: Target, overlay: Overlay) -> Receipt:
    if (earlier := read_receipt(located)) is not None:
        raise PackageError(
            f"target {earlier.target}'s {earlier.tier} tier is already on "
            f"{located.dist.describe()} (receipt {receipt_dir(located) / RECEIPT}); "
            f"take it off first: {located.harness_command('uninstall')}"
        )
    check_release(target, located.dist)
    check_recorded(located, overlay.files)
    check_source(located, overlay)
    receipt = make_receipt(located, overlay)
    try:
        with stop_signals_held():
            _write_receipt(located, receipt, overlay)
            for path in overlay.files:
                _replace_file(located.package_file(path), overlay.patched[path])
    except BaseException as exc:
        with stop_signals_held():
            _put_back(located, {path: overlay.pristine[path] for path in overlay.files})
        if isinstance(exc, OSError):
            raise PackageError(
                f"cannot write {exc.filename or located.dist.site}: "
                f"{exc.strerror or exc}; "
                f"{located.dist.describe()} is as it was"
            ) from None
        raise
    return receipt


def make_receipt(located: Located, overlay: Overlay) -> Receipt:
    return Receipt(
        target=overlay.target,
        tier=overlay.tier,
        release=overlay.release,
        distribution=f"{located.dist.name} {located.dist.version}",
        files={
            path: {
                "pristine": digest(overlay.pristine[path]),
                "patched": digest(overlay.patched[path]),
            }
            for path in overlay.files
        },
        record_sha256=digest(read_file(located.dist.record)),
    )


def _put_back(located: Located, pristine: dict[str, bytes]) -> None:
    """Every file to its pristine bytes, RECORD and the receipt as before.
    Only the receipt's own files are written: a file is pristine or patched."""
    for path, data in pristine.items():
        where = located.package_file(path)
        if file_digest(where) != digest(data):
            _replace_file(where, data)
    _remove_receipt(located)


def uninstall(located: Located) -> Receipt | None:
    """Put back the released files the receipt holds; None when there is no
    receipt and every file of vllm/ is as RECORD says (nothing installed).
    Files that differ from RECORD with no receipt to say why are refused:
    nothing says what they were. Under the installation lock."""
    with installation_lock(located):
        return _uninstall(located)


def _uninstall(located: Located) -> Receipt | None:
    receipt = read_receipt(located)
    if receipt is None:
        checked, differing = record_mismatches(located)
        if differing:
            shown = ", ".join(differing[:3]) + (" ..." if len(differing) > 3 else "")
            raise PackageError(
                f"no receipt of the series is on {located.dist.describe()}, yet "
                f"{len(differing)} of the {checked} files of vllm/ differ from "
                f"RECORD ({shown}): patched with the receipt lost, or changed by "
                f"hand; nothing says what to put back: reinstall "
                f"{located.dist.name}=={located.dist.version} with pip"
            )
        return None
    pristine = {}
    for path, digests in receipt.files.items():
        where = located.package_file(path)
        backup = receipt_file(located, f"{PRISTINE}/{path}")
        if file_digest(where) not in (digests["pristine"], digests["patched"]):
            raise PackageError(
                f"{where} changed after the series was installed (it is neither "
                f"the released nor the patched file); reinstall "
                f"{located.dist.name}=={located.dist.version} with pip"
            )
        try:
            pristine[path] = read_file(backup, RECEIPT_MAX_BYTES << 6)
        except (FileNotFoundError, ValueError):
            pristine[path] = b""
        if digest(pristine[path]) != digests["pristine"]:
            raise PackageError(
                f"the receipt's copy of the released {path} ({backup}) is "
                f"missing or damaged; reinstall {located.dist.name}=="
                f"{located.dist.version} with pip"
            )
    copy = receipt_file(located, RECORD_COPY)
    if not copy.is_file() or file_digest(copy) != receipt.record_sha256:
        raise PackageError(
            f"the receipt's copy of RECORD ({copy}) is missing or damaged; "
            f"reinstall {located.dist.name}=={located.dist.version} with pip"
        )
    recorded = read_record(copy)
    for path, digests in receipt.files.items():
        if recorded.get(path) != digests["pristine"]:
            raise PackageError(
                f"the receipt's released {path} is not the file the wheel "
                f"installed (its copy of RECORD says otherwise); reinstall "
                f"{located.dist.name}=={located.dist.version} with pip"
            )
    with stop_signals_held():
        _take_off(located, pristine)
    return receipt


def _take_off(located: Located, pristine: dict[str, bytes]) -> None:
    """Every file to its released bytes, then RECORD and the receipt as
    before the install: all of it, or, on any error, nothing. What was
    already written is put back as it was found, and the error says so."""
    record = read_file(located.dist.record)
    written: list[tuple[Path, bytes]] = []  # each file written, as it was
    try:
        for path, data in pristine.items():
            where = located.package_file(path)
            if file_digest(where) != digest(data):
                found = read_file(where)
                _replace_file(where, data)
                written.append((where, found))
        _remove_receipt(located)
    except BaseException as exc:
        undone = _undo(located, written, record)
        if not isinstance(exc, OSError):
            raise
        cause = (
            f"cannot write {exc.filename or located.dist.site}: {exc.strerror or exc}"
        )
        if undone is not None:
            raise PackageError(
                f"{cause}; nor could what was already written be put back "
                f"({undone}): {located.harness_command('status')} says which "
                f"file is which"
            ) from None
        raise PackageError(
            f"{cause}; {located.dist.describe()} is as it was, the series on "
            f"it with its receipt: uninstall again once it can be written"
        ) from None


def _undo(located: Located, written: list[tuple[Path, bytes]], record: bytes):
    """The files written and RECORD put back as they were found; None when
    that worked, else what could not be written."""
    try:
        for where, found in reversed(written):
            _replace_file(where, found)
        if read_file(located.dist.record) != record:
            _replace_file(located.dist.record, record)
    except OSError as exc:
        return f"{exc.filename or located.dist.site}: {exc.strerror or exc}"
    return None


@contextmanager
def installed_series(located: Located, target: Target, overlay: Overlay):
    """The overlay installed while the block runs, taken off after."""
    install(located, target, overlay)
    try:
        yield
    finally:
        uninstall(located)


def whole_series(python: str) -> tuple[Located, Receipt | None]:
    """The vllm ``python`` imports and the receipt of the series on it (None:
    as released), refused where the series is not whole (an install
    stopped short, a file changed since): then the engine does not run the
    tier the receipt names."""
    located = locate(python)
    with installation_lock(located, shared=True):
        receipt = read_receipt(located)
        if receipt is None or set(file_states(located, receipt).values()) == {
            "patched"
        }:
            return located, receipt
    raise PackageError(
        f"the {receipt.tier} tier on {located.dist.describe()} is not whole "
        f"(python -m harness status --python {python} says which file): the "
        f"engine does not run that tier"
    )
