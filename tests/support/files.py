"""Files no reader should wait on or hold whole: a FIFO that a careless
reader would block on, a sparse file of gigabytes that takes no disk."""

import contextlib
import os
import threading
import time
from pathlib import Path


def fifo_that_ends(path: Path, after_s: float = 5.0, rounds: int = 12) -> Path:
    """A FIFO at ``path`` whose readers, if one is blocked on it, are let go
    every ``after_s`` seconds for ``rounds`` rounds (a writer opens it and
    closes it: EOF). So a reader that waits on it fails its test instead of
    hanging the suite."""
    os.mkfifo(path)

    def release() -> None:
        for _ in range(rounds):
            time.sleep(after_s)
            with contextlib.suppress(OSError):  # no reader waits on it now
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))

    threading.Thread(target=release, daemon=True).start()
    return path


def sparse_file(path: Path, size: int = 3 << 30) -> Path:
    """A regular file of ``size`` zero bytes that takes no disk."""
    with path.open("wb") as stream:
        stream.truncate(size)
    return path
