"""What a series is made against, as upstream names it: the release's tag
and the commit it was cut from.

An export commits the pristine tree in a scratch repository (with a fixed
identity and date), and that commit exists nowhere upstream: the mails and
texts name the release instead, with the commit id its sdist records
(``__commit_id__`` in ``vllm/_version.py``: ``'g62d4bc3c7'`` in 0.34.0, an
abbreviated id). Only a target pinned to a full commit id (a git source)
gets a ``base-commit:`` trailer, naming that commit.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from harness.reading import Refused, read_bounded
from harness.targets import GitSource, SdistSource, Target

VERSION_FILE = Path("vllm") / "_version.py"
_COMMIT_ID = re.compile(
    r"^__commit_id__\s*=\s*(?:commit_id\s*=\s*)?['\"]g?(?P<commit>[0-9a-f]{7,40})['\"]",
    re.MULTILINE,
)
# The most of a version file that is read: a few hundred bytes.
VERSION_FILE_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Base:
    """The release a series is made against: its name, tag and commit id
    (None where the tree records none), full only where the target pins
    one."""

    release: str
    tag: str | None = None
    commit: str | None = None

    @property
    def full(self) -> bool:
        return self.commit is not None and len(self.commit) == 40

    def named(self) -> str:
        """``v0.34.0 (62d4bc3c7)``, or the release's name where the tree
        records no commit."""
        name = self.tag or self.release
        return f"{name} ({self.commit})" if self.commit else name


def release_base(target: Target, pristine: Path) -> Base:
    """The base of ``target``: its pinned commit (a git source), else the
    commit id the pristine tree's version file records."""
    source = target.source
    if isinstance(source, GitSource):
        return Base(source.release_name(), None, source.commit)
    tag = f"v{source.version}" if isinstance(source, SdistSource) else None
    return Base(source.release_name(), tag, recorded_commit(pristine))


def recorded_commit(tree: Path) -> str | None:
    """The commit id in ``tree``'s vllm/_version.py (without its ``g``), or
    None where it records none."""
    try:
        data = read_bounded(tree / VERSION_FILE, VERSION_FILE_MAX_BYTES)
    except (OSError, Refused):
        return None
    match = _COMMIT_ID.search(data.decode("utf-8", "replace"))
    return match["commit"] if match else None
