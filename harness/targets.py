"""The pin file, harness/targets.toml, read into dataclasses and validated.

Every error names the target and the field so that a broken pin is fixed where
it is written. Files the pins point at (series files, local source trees) are
checked when they are used, not here.
"""

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from harness import checkout
from harness.errors import TargetError

# The tiers a series table may name; `default` is required.
TIERS = ("default", "strict")
SELECTIONS = ("ci", "full")
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
class Target:
    name: str
    description: str
    source: Source
    patches_dir: Path
    series: dict[str, str]
    upstream_tests: tuple[str, ...]
    upstream_tests_full: tuple[str, ...]

    def series_file(self, tier: str) -> Path:
        if tier not in self.series:
            known = ", ".join(sorted(self.series))
            raise TargetError(
                f"target {self.name}: no tier {tier!r} in its series table "
                f"(it has: {known})"
            )
        return self.patches_dir / self.series[tier]

    def toxenv(self, tier: str) -> str:
        """The tox environment that runs this target's verdict for a tier."""
        return f"vllm-{self.name}" if tier == "default" else f"vllm-{self.name}-{tier}"

    def selection(self, name: str) -> tuple[str, ...]:
        if name == "ci":
            return self.upstream_tests
        if name == "full":
            return self.upstream_tests_full
        raise TargetError(f"unknown selection {name!r}; use one of {SELECTIONS}")


def load_targets(path: Path | None = None) -> dict[str, Target]:
    path = path or checkout.targets_file()
    try:
        with path.open("rb") as pin_file:
            document = tomllib.load(pin_file)
    except OSError as exc:
        raise TargetError(f"cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise TargetError(f"{path} is not valid TOML: {exc}") from None
    tables = document.get("targets")
    if not isinstance(tables, dict) or not tables:
        raise TargetError(f"{path} has no [targets.NAME] tables")
    root = path.resolve().parent.parent
    return {name: _parse_target(name, table, root) for name, table in tables.items()}


def get_target(name: str, path: Path | None = None) -> Target:
    targets = load_targets(path)
    if name not in targets:
        known = ", ".join(targets)
        raise TargetError(f"unknown target {name!r} (known: {known})")
    return targets[name]


def _parse_target(name: str, table: object, root: Path) -> Target:
    if not isinstance(table, dict):
        raise TargetError(f"target {name}: must be a table")
    allowed = {
        "description",
        "source",
        "patches",
        "series",
        "upstream_tests",
        "upstream_tests_full",
    }
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise TargetError(f"target {name}: unknown field(s) {', '.join(unknown)}")
    series = _required(name, table, "series", dict)
    if "default" not in series:
        raise TargetError(f"target {name}: field series needs a 'default' tier")
    for tier, file_name in series.items():
        if tier not in TIERS:
            raise TargetError(
                f"target {name}: field series names tier {tier!r}; tiers are "
                f"{', '.join(TIERS)}"
            )
        if not isinstance(file_name, str) or not file_name:
            raise TargetError(f"target {name}: field series.{tier} must be a file name")
    return Target(
        name=name,
        description=_required(name, table, "description", str),
        source=_parse_source(name, _required(name, table, "source", dict), root),
        patches_dir=root / _required(name, table, "patches", str),
        series=dict(series),
        upstream_tests=_test_list(name, table, "upstream_tests"),
        upstream_tests_full=_test_list(name, table, "upstream_tests_full"),
    )


def _parse_source(name: str, source: dict, root: Path) -> Source:
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
        requirement = _required(name, source, "sdist", str, prefix="source.")
        match = _REQUIREMENT.fullmatch(requirement)
        if not match:
            raise TargetError(
                f"target {name}: field source.sdist must read NAME==VERSION, "
                f"got {requirement!r}"
            )
        sha256 = _required(name, source, "sha256", str, prefix="source.")
        if not _SHA256.fullmatch(sha256):
            raise TargetError(
                f"target {name}: field source.sha256 must be 64 lowercase hex digits"
            )
        return SdistSource(match["name"], match["version"], sha256)
    if kind == "git":
        url = _required(name, source, "git", str, prefix="source.")
        commit = _required(name, source, "commit", str, prefix="source.")
        if not _COMMIT.fullmatch(commit):
            raise TargetError(
                f"target {name}: field source.commit must be a full 40-hex commit id"
            )
        return GitSource(url, commit)
    path = Path(_required(name, source, "path", str, prefix="source.")).expanduser()
    return PathSource(path if path.is_absolute() else root / path)


def _required(name: str, table: dict, field: str, kind: type, prefix: str = ""):
    if field not in table:
        raise TargetError(f"target {name}: missing field {prefix}{field}")
    value = table[field]
    if not isinstance(value, kind) or (kind is str and not value):
        raise TargetError(
            f"target {name}: field {prefix}{field} must be a non-empty {kind.__name__}"
        )
    return value


def _test_list(name: str, table: dict, field: str) -> tuple[str, ...]:
    tests = _required(name, table, field, list)
    if not tests or not all(isinstance(test, str) and test for test in tests):
        raise TargetError(
            f"target {name}: field {field} must be a non-empty list of pytest node ids"
        )
    return tuple(tests)
