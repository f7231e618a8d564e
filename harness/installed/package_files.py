"""The files of an installed package, read as data and never through a link.

A RECORD is read as a wheel writes it (`read_record`); a file is read only
when it is a regular file, opened without following a symlink and without
waiting on a FIFO (`read_file`, `file_digest`); a path inside the package
or its .dist-info is taken only when it is plain (no ``..``, not absolute)
and no part of it below the site directory is a symlink (`no_link_below`).
So nothing the harness reads or writes there leaves the package's own files.
"""

import base64
import csv
import hashlib
import io
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from harness.errors import PackageError
from harness.reading import Refused, open_regular, size_in_words


def read_record(record: Path) -> dict[str, str | None]:
    """Path -> sha256 (hex) of every file a RECORD lists (None: no hash)."""
    digests: dict[str, str | None] = {}
    try:
        text = read_file(record).decode("utf-8")
        rows = list(csv.reader(io.StringIO(text)))
        for row in rows:
            if not row:
                continue
            path, digest = row[0], row[1] if len(row) > 1 else ""
            algorithm, _, value = digest.partition("=")
            if algorithm == "sha256" and value:
                padded = value + "=" * (-len(value) % 4)
                digests[path] = base64.b64decode(
                    padded, altchars=b"-_", validate=True
                ).hex()
            else:
                digests[path] = None
    except FileNotFoundError:
        raise PackageError(f"{record} is missing; reinstall it with pip") from None
    except (ValueError, csv.Error) as exc:  # UnicodeDecodeError, binascii.Error
        raise PackageError(
            f"{record} is not a RECORD the harness can read ({exc}); reinstall "
            f"the distribution with pip"
        ) from None
    return digests


def record_line(path: str) -> str:
    """A RECORD row for a file added after the install, without a hash (as
    RECORD lists itself), so that uninstalling the distribution removes it."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow([path, "", ""])
    return buffer.getvalue()


@contextmanager
def _regular(path: Path) -> Iterator[BinaryIO]:
    """``path`` opened for reading when it is a regular file
    (harness.reading.open_regular); a symlink, a FIFO or a directory is
    refused (PackageError), never followed or waited on. FileNotFoundError
    when there is none."""
    try:
        with open_regular(path, follow_links=False) as stream:
            try:
                yield stream
            except OSError as exc:
                raise PackageError(f"cannot read {path}: {exc.strerror}") from None
    except FileNotFoundError:
        raise
    except Refused:
        raise PackageError(
            f"{path} is not a regular file; the harness reads and writes only "
            f"the package's own files"
        ) from None
    except OSError as exc:
        if os.path.islink(path):
            raise PackageError(
                f"{path} is a symlink (to {os.readlink(path)}); the harness "
                f"reads and writes only the package's own files"
            ) from None
        raise PackageError(f"cannot read {path}: {exc.strerror}") from None


# The most of a package's file that is read whole (RECORD, a module) where
# the caller names no bound: vLLM's largest files are a few MiB.
FILE_MAX_BYTES = 64 << 20


def read_file(path: Path, limit: int | None = None) -> bytes:
    """The bytes of a regular file (`_regular`); FileNotFoundError when there
    is none. One of more than ``limit`` bytes is `Refused` (a ValueError);
    without a limit, one of more than FILE_MAX_BYTES is a PackageError."""
    with _regular(path) as stream:
        data = stream.read((limit or FILE_MAX_BYTES) + 1)
    if limit is not None and len(data) > limit:
        raise Refused(f"larger than {limit} bytes")
    if len(data) > FILE_MAX_BYTES:
        raise PackageError(
            f"{path} is larger than {size_in_words(FILE_MAX_BYTES)}, which no "
            f"file of an installed vllm is; reinstall it with pip"
        )
    return data


def file_digest(path: Path) -> str:
    """sha256 of a regular file (`_regular`), "missing" when there is none."""
    digest = hashlib.sha256()
    try:
        with _regular(path) as stream:
            while chunk := stream.read(1 << 20):
                digest.update(chunk)
    except FileNotFoundError:
        return "missing"
    return digest.hexdigest()


def plain_relative(path: str) -> bool:
    """``path`` is relative, in plain parts: no ``..``, ``.``, empty part or NUL."""
    return (
        bool(path)
        and not path.startswith("/")
        and "\0" not in path
        and all(part not in ("", ".", "..") for part in path.split("/"))
    )


def no_link_below(root: Path, relative: str, whose: str) -> Path:
    """``root / relative``, refused when ``relative`` is not plain or when a
    part of it below ``root`` is a symlink (it would read or write outside
    what ``whose`` owns). What does not exist yet is not checked further."""
    if not plain_relative(relative):
        raise PackageError(
            f"{relative!r} is not a plain path inside {root} (absolute, or with "
            f"'..'); the harness reads and writes only the files of {whose}"
        )
    where = root
    for part in relative.split("/"):
        where = where / part
        try:
            mode = os.lstat(where).st_mode
        except FileNotFoundError:
            break
        except OSError as exc:
            raise PackageError(f"cannot read {where}: {exc.strerror}") from None
        if stat.S_ISLNK(mode):
            raise PackageError(
                f"{where} is a symlink (to {os.readlink(where)}); the harness "
                f"reads and writes only the files of {whose}, never through a "
                f"link: reinstall it with pip"
            )
    return root / relative
