"""Everything under a directory, for "nothing else changed" assertions."""

import hashlib
import os
import stat
from pathlib import Path


def tree_digest(root: Path) -> dict[str, str]:
    """Every entry under root (.git and dot files included, symlinks not
    followed): its path -> its kind, mode and a sha256 of its bytes or link."""
    found = {}
    for directory, names, files in os.walk(root):
        for name in names + files:
            path = Path(directory) / name
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                content = os.readlink(path).encode("utf-8", "surrogateescape")
            elif stat.S_ISREG(info.st_mode):
                content = path.read_bytes()
            else:
                content = b""
            digest = hashlib.sha256(content).hexdigest()[:16]
            found[str(path.relative_to(root))] = f"{oct(info.st_mode)} {digest}"
    return found


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The entries made, removed or altered between two digests."""
    return sorted(
        name
        for name in before.keys() | after.keys()
        if before.get(name) != after.get(name)
    )
