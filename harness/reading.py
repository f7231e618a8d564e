"""One bounded reader for every file the harness reads and did not write.

A verdict or an e2e report given on the command line, a receipt and the
files of an installed package, a capture's ``.seq`` file, the test files of
a fork (`targets --in DIR`), a checkout's version file: each is read here,
and only when it is a regular file (a FIFO, a device, a directory or a
socket is refused at once, never waited on or read without end) holding no
more than the bound its caller names. `Refused` says which it was, in words
that follow the file's name; an OSError (missing, unreadable, a symlink not
followed) is left to the caller, which knows what the file is for.

Only the standard library: `ci` reads reports with it before any install.
"""

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


class Refused(ValueError):
    """A file the harness will not read: not a regular file, or larger than
    any file of its kind is. The message says which, after the file's name."""


_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISSOCK, "a socket"),
)


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, in words ("a FIFO", "a directory", ...)."""
    return next((kind for test, kind in _KINDS if test(mode)), "not a file")


def size_in_words(limit: int) -> str:
    """``limit`` bytes as the messages say it: "64 MiB", "1000 bytes"."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if limit >= 1 << shift and limit % (1 << shift) == 0:
            return f"{limit >> shift} {unit}"
    return f"{limit} bytes"


@contextmanager
def open_regular(path: Path | str, *, follow_links: bool = True) -> Iterator[BinaryIO]:
    """``path`` opened for reading when it is a regular file; `Refused`
    otherwise, before a byte is read (the open itself never waits: it is
    non-blocking). With ``follow_links`` False a symlink is not followed:
    the open fails with ELOOP."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if not follow_links:
        flags |= os.O_NOFOLLOW
    descriptor = os.open(path, flags)
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise Refused(f"{kind_of(mode)}, not a regular file")
        stream = os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise
    with stream:
        yield stream


def read_bounded(
    path: Path | str, limit: int, *, follow_links: bool = True, what: str = "file"
) -> bytes:
    """The bytes of the regular file at ``path`` (`open_regular`); `Refused`
    when it holds more than ``limit`` bytes (``what`` names its kind in the
    message: "larger than 64 MiB, which no report is")."""
    with open_regular(path, follow_links=follow_links) as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise Refused(f"larger than {size_in_words(limit)}, which no {what} is")
    return data


def bounded_lines(stream: BinaryIO, longest: int, most: int) -> Iterator[bytes]:
    """The first ``most`` lines of ``stream`` (no more are read), each of at
    most ``longest`` bytes (`Refused` past that): a file of one endless line,
    or of more lines than its reader can use, is never held whole."""
    for count in range(most):
        line = stream.readline(longest + 1)
        if not line:
            return
        if len(line.rstrip(b"\r\n")) > longest:
            raise Refused(f"line {count + 1} is longer than {longest} bytes")
        yield line
