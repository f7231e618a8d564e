"""The pins of a target's table in harness/targets.toml: its source (a
release's sdist, a git commit or a local tree) and its released wheels, each
read into a dataclass and checked, every error naming the target and field.
"""

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

from harness.errors import TargetError

# Released wheels a target can name: `cpu` (a CPU build of the whole engine,
# for `e2e`), `gpu` (the CUDA wheel for an x86_64 Linux GPU machine, for
# vllm-TARGET-gpu). The harness downloads each file itself and checks its
# pinned sha256 before anything installs it.
WHEELS = ("cpu", "gpu")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_REQUIREMENT = re.compile(r"(?P<name>[A-Za-z0-9_.-]+)==(?P<version>[A-Za-z0-9_.+-]+)")


@dataclass(frozen=True)
class SdistSource:
    """A release's sdist from the package index, checked against its sha256."""

    name: str
    version: str
    sha256: str
    kind = "sdist"

    def identity(self) -> str:
        """What names the pristine content exactly (its cache entry)."""
        return f"sdist-{self.name}-{self.version}-{self.sha256}"

    def source_id(self) -> str:
        """The short id CI keys caches by."""
        return self.sha256

    def release_name(self) -> str:
        return f"vLLM {self.version}"

    def describe(self) -> str:
        return f"the sdist {self.name}=={self.version} (sha256 {self.sha256})"


@dataclass(frozen=True)
class GitSource:
    """A commit of a git repository."""

    url: str
    commit: str
    kind = "git"

    def identity(self) -> str:
        return f"git-{self.commit}"

    def source_id(self) -> str:
        return self.commit

    def release_name(self) -> str:
        return f"vLLM {self.commit[:12]}"

    def describe(self) -> str:
        return f"commit {self.commit} of {self.url}"


@dataclass(frozen=True)
class PathSource:
    """A local directory, used read-only; it can change between runs, so
    nothing built from it is cached."""

    path: Path
    kind = "path"

    def identity(self) -> None:
        return None

    def source_id(self) -> str:
        return ""

    def release_name(self) -> str:
        return f"vLLM {self.path.name}"

    def describe(self) -> str:
        return f"the local tree {self.path}"


Source = SdistSource | GitSource | PathSource


@dataclass(frozen=True)
class Wheel:
    """A released wheel: NAME==VERSION, and the sha256 of the file the
    harness downloads and checks before anything installs it."""

    name: str
    version: str
    sha256: str

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


def parse_wheels(name: str, wheels: object) -> dict[str, Wheel]:
    """Each wheel as { requirement = "NAME==VERSION", sha256 = "..." }."""
    if not isinstance(wheels, dict):
        raise TargetError(f"target {name}: field wheels must be a table")
    known(f"target {name}: field wheels:", wheels, WHEELS)
    parsed = {}
    for kind, value in wheels.items():
        field = f"target {name}: field wheels.{kind}"
        if not isinstance(value, dict):
            raise TargetError(
                f'{field} must read {{ requirement = "NAME==VERSION", sha256 = '
                f'"<sha256 of the wheel file>" }}, got {value!r}'
            )
        known(f"{field}:", value, ("requirement", "sha256"))
        requirement, sha256 = value.get("requirement"), value.get("sha256")
        if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
            raise TargetError(
                f"{field}.sha256 must be 64 lowercase hex digits (the sha256 of "
                f"the wheel file), got {sha256!r}"
            )
        field += ".requirement"
        match = _REQUIREMENT.fullmatch(
            requirement if isinstance(requirement, str) else ""
        )
        if not match:
            raise TargetError(f"{field} must read NAME==VERSION, got {requirement!r}")
        parsed[kind] = Wheel(match["name"], match["version"], sha256)
    return parsed


def parse_source(name: str, source: dict, root: Path) -> Source:
    kinds = [kind for kind in ("sdist", "git", "path") if kind in source]
    if len(kinds) != 1:
        raise TargetError(
            f"target {name}: field source needs exactly one of sdist, git, path "
            f"(found: {', '.join(kinds) or 'none'})"
        )
    kind = kinds[0]
    expected = {
        "sdist": {"sdist", "sha256"},
        "git": {"git", "commit"},
        "path": {"path"},
    }
    extra = sorted(set(source) - expected[kind])
    if extra:
        raise TargetError(
            f"target {name}: field source.{extra[0]} does not belong to a {kind} source"
        )
    if kind == "sdist":
        requirement = required(name, source, "sdist", str, prefix="source.")
        match = _REQUIREMENT.fullmatch(requirement)
        if not match:
            raise TargetError(
                f"target {name}: field source.sdist must read NAME==VERSION, "
                f"got {requirement!r}"
            )
        sha256 = required(name, source, "sha256", str, prefix="source.")
        if not _SHA256.fullmatch(sha256):
            raise TargetError(
                f"target {name}: field source.sha256 must be 64 lowercase hex digits"
            )
        return SdistSource(match["name"], match["version"], sha256)
    if kind == "git":
        url = required(name, source, "git", str, prefix="source.")
        commit = required(name, source, "commit", str, prefix="source.")
        if not _COMMIT.fullmatch(commit):
            raise TargetError(
                f"target {name}: field source.commit must be a full 40-hex commit id"
            )
        return GitSource(url, commit)
    path = Path(required(name, source, "path", str, prefix="source.")).expanduser()
    return PathSource(path if path.is_absolute() else root / path)


def hint(name: str, known) -> str:
    close = difflib.get_close_matches(str(name), [str(key) for key in known], n=1)
    return f"; perhaps you meant {close[0]!r}?" if close else ""


def known(where: str, table: dict, allowed) -> None:
    """Refuse keys of ``table`` not in ``allowed``, suggesting the closest."""
    for key in table:
        if key not in allowed:
            raise TargetError(f"{where} {key!r} is not known{hint(key, allowed)}")


def required(name: str, table: dict, field: str, kind: type, prefix: str = ""):
    if field not in table:
        raise TargetError(f"target {name}: missing field {prefix}{field}")
    value = table[field]
    if not isinstance(value, kind) or (kind is str and not value):
        raise TargetError(
            f"target {name}: field {prefix}{field} must be a non-empty {kind.__name__}"
        )
    return value
