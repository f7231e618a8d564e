"""The scratch git repository in which `port` merges a series onto another release.

It holds only the files the series touches. Branch `from` starts with them
as the --from target's pristine tree has them (the base), and each patch is
applied there in turn (`git apply`, which never fuzzes) and committed. Branch
`to` starts from the base with the files as the --to target's pristine tree
has them, and each patch's commit is cherry-picked onto it: a three-way merge
whose base is the --from side just before the patch, whose sides are that
patch and the --to side with the earlier patches ported. Rename detection is
off: a file the new release lacks is a conflict, never another file.

The user's git configuration and GIT_* variables are left out while the
harness runs git here, so every machine merges alike; the repository's own
configuration (an identity, diff3 conflict markers that show the base, no
renames) is written into it, for a user who resolves a conflict there.
"""

import os
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from harness import processes
from harness.errors import SeriesError, excerpt
from harness.series.snapshot import FileState

# The identity and date of every commit made here, so the same port gives
# the same commits everywhere.
IDENTITY = ("vllm-kv-series port", "port@localhost")
DATE = "2000-01-01T00:00:00+0000"
CONFIG = {
    "user.name": IDENTITY[0],
    "user.email": IDENTITY[1],
    "merge.conflictStyle": "diff3",
    "merge.renames": "false",
    "core.autocrlf": "false",
    "commit.gpgSign": "false",
    "rerere.enabled": "false",
    "gc.auto": "0",
}
# What `git status --porcelain` says of an unmerged path, in words: "ours" is
# the --to release (with the earlier patches), "theirs" the patch.
UNMERGED = {
    "UU": "both the patch and {release} changed it",
    "AA": "the patch creates it, and {release} has a file there",
    "DU": "{release} has no such file, and the patch changes it",
    "UD": "the patch deletes it, and {release} changed it",
    "DD": "both the patch and {release} delete it",
    "AU": "{release} adds it, and the patch's base has no such file",
    "UA": "the patch adds it, and {release}'s side has no such file",
}
MARKER_START = re.compile(r"^<{7}( |$)")
MARKER_END = re.compile(r"^>{7}( |$)")


@dataclass(frozen=True)
class Conflict:
    """One conflicting place: a file, and where in it (or why it conflicts)."""

    path: str
    where: str

    def __str__(self) -> str:
        return f"{self.path}: {self.where}"


class MergeRepo:
    """The repository at ``path``: `from` holds the base and the patches as
    written, `to` the other release with the patches ported so far."""

    def __init__(self, path: Path, release: str):
        self.path = path
        self.release = release  # the --to side, in words ("vLLM 0.34.0")

    def git(self, *args: str, check: bool = True):
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CEILING_DIRECTORIES": str(self.path.resolve().parent),
            "GIT_AUTHOR_DATE": DATE,
            "GIT_COMMITTER_DATE": DATE,
            "LC_ALL": "C",
        }
        result = processes.run(["git", *args], cwd=self.path, env=env)
        if check and result.returncode != 0:
            said = excerpt((result.stderr or result.stdout).strip()) or "no output"
            raise SeriesError(
                f"git {args[0]} failed in {self.path}:\n{textwrap.indent(said, '    ')}"
            )
        return result

    def create(self, base: dict[str, FileState], other: dict[str, FileState]) -> None:
        """The base commit on `from`, and `to` made from it with ``other``."""
        self.path.mkdir()
        self.git("init", "--quiet", "--initial-branch=from")
        for name, value in CONFIG.items():
            self.git("config", name, value)
        write_states(self.path, base)
        self._commit("the files the series touches, as the --from target has them")
        self.git("checkout", "--quiet", "-b", "to")
        write_states(self.path, other)
        self._commit(f"the same files, as {self.release} has them")
        self.git("checkout", "--quiet", "from")

    def commit_patch(self, patch: Path, strip: int, name: str) -> str | None:
        """Apply ``patch`` on `from` (no fuzz) and commit it; its commit id,
        or None where it does not apply."""
        command = ["apply", f"-p{strip}", "--whitespace=nowarn", str(patch.resolve())]
        if self.git(*command, check=False).returncode != 0:
            return None
        return self._commit(name)

    def applies(self, patch: Path, strip: int) -> bool:
        """Whether ``patch`` applies as it is (no fuzz) to the work tree."""
        command = ["apply", "--check", f"-p{strip}", str(patch.resolve())]
        return self.git(*command, check=False).returncode == 0

    def pick(self, commit: str) -> list[Conflict]:
        """Cherry-pick ``commit`` onto the checked-out branch: the conflicts
        it leaves in the work tree, none where it was committed."""
        result = self.git(
            "cherry-pick",
            "--keep-redundant-commits",
            "--strategy=ort",
            "--strategy-option=no-renames",
            commit,
            check=False,
        )
        if result.returncode == 0:
            return []
        conflicts = self.conflicts()
        if not conflicts:
            said = excerpt((result.stderr or result.stdout).strip()) or "no output"
            raise SeriesError(
                f"git cherry-pick failed in {self.path} without a conflict:\n"
                f"{textwrap.indent(said, '    ')}"
            )
        return conflicts

    def conflicts(self) -> list[Conflict]:
        """Each unmerged path, and each block of conflict markers in it."""
        status = self.git("status", "--porcelain=v1", "-z").stdout
        found = []
        for entry in filter(None, status.split("\0")):
            code, path = entry[:2], entry[3:]
            if code not in UNMERGED:
                continue
            blocks = marker_blocks(self.path / path)
            if code in ("UU", "AA") and blocks:
                found += [Conflict(path, f"lines {a}-{b}") for a, b in blocks]
            else:
                found.append(
                    Conflict(path, UNMERGED[code].format(release=self.release))
                )
        return found

    def rev(self, name: str) -> str:
        return self.git("rev-parse", "--short", name).stdout.strip()

    def _commit(self, message: str) -> str:
        self.git("add", "--all")
        self.git("commit", "--quiet", "--allow-empty", "--message", message)
        return self.git("rev-parse", "HEAD").stdout.strip()


def write_states(root: Path, states: dict[str, FileState]) -> None:
    """Make the files under root what ``states`` says (None: no file)."""
    for path, state in states.items():
        file = root / path
        if state is None:
            file.unlink(missing_ok=True)
            continue
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(state[0])
        os.chmod(file, 0o755 if state[1] & 0o111 else 0o644)  # as git keeps it


def marker_blocks(file: Path) -> list[tuple[int, int]]:
    """(first line, last line) of each block of git's conflict markers."""
    try:
        lines = file.read_bytes().decode("utf-8", "surrogateescape").split("\n")
    except OSError:
        return []
    blocks, start = [], None
    for number, line in enumerate(lines, 1):
        if start is None and MARKER_START.match(line):
            start = number
        elif start is not None and MARKER_END.match(line):
            blocks.append((start, number))
            start = None
    return blocks
