"""The pin file, harness/targets.toml, read into dataclasses and validated.

A target's fields are resolved in a cascade: the `[defaults]` table, then the
table of the target it names with `same_as` (if any), then its own table; a
field written later replaces the earlier one whole. So a target states only
what differs.

Every error names the target and the field so that a broken pin is fixed
where it is written, and an unknown field or name suggests the closest known
one. Files the pins point at (series files, local source trees) are checked
when they are used, not here.
"""

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from harness import checkout
from harness.errors import TargetError
from harness.tiers import STREAMS, TIERS, parse_fixes, parse_streams
from harness.tiers import hint as _hint
from harness.tiers import known as _known

SELECTIONS = ("ci", "full")
# What a target's table may hold; every one of them but `same_as`,
# `description` and `source` may also be written once in [defaults].
FIELDS = (
    "same_as",
    "description",
    "source",
    "patches",
    "series",
    "fixes",
    "streams",
    "wheels",
    "upstream_tests",
    "upstream_tests_full",
)
DEFAULT_FIELDS = FIELDS[3:]
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


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    source: Source
    patches_dir: Path
    series: dict[str, str]
    upstream_tests: tuple[str, ...]
    upstream_tests_full: tuple[str, ...]
    # Per tier: the classes (docs/contract.md) the tier's series fixes; the
    # conformance suite holds every other class to its pristine count.
    fixes: dict[str, frozenset[str]]
    # Released wheels by kind (WHEELS).
    wheels: dict[str, Wheel]
    streams: dict[str, str] = field(default_factory=dict)  # tier -> STREAMS

    def stream(self, tier: str) -> str:
        return self.streams.get(tier, STREAMS[0])

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

    def gpu_toxenv(self) -> str:
        """The tox environment that checks the series on the GPU wheel."""
        return f"vllm-{self.name}-gpu"

    def e2e_toxenv(self) -> str:
        """The tox environment that runs the e2e session on the CPU wheel."""
        return f"e2e-{self.name}"

    def wheel(self, kind: str) -> Wheel:
        if kind not in self.wheels:
            raise TargetError(
                f"target {self.name}: no {kind} wheel (field wheels.{kind} in "
                f"targets.toml)"
            )
        return self.wheels[kind]

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
    except UnicodeDecodeError as exc:
        raise TargetError(
            f"{path} is not UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset "
            f"{exc.start}), as TOML must be"
        ) from None
    _known(f"{path}: table", document, ("defaults", "targets"))
    tables = document.get("targets")
    if not isinstance(tables, dict) or not tables:
        raise TargetError(f"{path} has no [targets.NAME] tables")
    defaults = document.get("defaults", {})
    if not isinstance(defaults, dict):
        raise TargetError(f"{path}: [defaults] must be a table")
    _known("[defaults]: field", defaults, DEFAULT_FIELDS)
    root = path.resolve().parent.parent
    return {
        name: _parse_target(name, {**defaults, **_cascade(name, tables, ())}, root)
        for name in tables
    }


def get_target(name: str, path: Path | None = None) -> Target:
    targets = load_targets(path)
    if name not in targets:
        known = ", ".join(targets)
        raise TargetError(
            f"unknown target {name!r} (known: {known}){_hint(name, targets)}"
        )
    return targets[name]


def _cascade(name: str, tables: dict, seen: tuple[str, ...]) -> dict:
    """A target's own fields over those of the target it is `same_as`."""
    table = tables[name]
    if not isinstance(table, dict):
        raise TargetError(f"target {name}: must be a table")
    _known(f"target {name}: field", table, FIELDS)
    fields = dict(table)
    other = fields.pop("same_as", None)
    if other is None:
        return fields
    if not isinstance(other, str) or other not in tables:
        raise TargetError(
            f"target {name}: same_as names no target: {other!r}"
            f"{_hint(str(other), tables)}"
        )
    if other in (name, *seen):
        chain = " -> ".join((*seen, name, other))
        raise TargetError(f"target {name}: same_as goes round in a circle: {chain}")
    return {**_cascade(other, tables, (*seen, name)), **fields}


def _parse_target(name: str, table: dict, root: Path) -> Target:
    series = _required(name, table, "series", dict)
    if "default" not in series:
        raise TargetError(f"target {name}: field series needs a 'default' tier")
    for tier, file_name in series.items():
        if tier not in TIERS:
            raise TargetError(
                f"target {name}: field series names tier {tier!r}; tiers are "
                f"{', '.join(TIERS)}{_hint(tier, TIERS)}"
            )
        if not isinstance(file_name, str) or not file_name:
            raise TargetError(f"target {name}: field series.{tier} must be a file name")
    source = _parse_source(name, _required(name, table, "source", dict), root)
    return Target(
        name=name,
        description=_required(name, table, "description", str),
        source=source,
        patches_dir=root / _required(name, table, "patches", str),
        series=dict(series),
        upstream_tests=_test_list(name, table, "upstream_tests"),
        upstream_tests_full=_test_list(name, table, "upstream_tests_full"),
        fixes=parse_fixes(name, _required(name, table, "fixes", dict), series),
        wheels=_parse_wheels(name, table.get("wheels", {})),
        streams=parse_streams(name, table.get("streams", {}), series),
    )


def _parse_wheels(name: str, wheels: object) -> dict[str, Wheel]:
    """Each wheel as { requirement = "NAME==VERSION", sha256 = "..." }."""
    if not isinstance(wheels, dict):
        raise TargetError(f"target {name}: field wheels must be a table")
    _known(f"target {name}: field wheels:", wheels, WHEELS)
    parsed = {}
    for kind, value in wheels.items():
        field = f"target {name}: field wheels.{kind}"
        if not isinstance(value, dict):
            raise TargetError(
                f'{field} must read {{ requirement = "NAME==VERSION", sha256 = '
                f'"<sha256 of the wheel file>" }}, got {value!r}'
            )
        _known(f"{field}:", value, ("requirement", "sha256"))
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
