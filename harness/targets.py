"""The pin file, harness/targets.toml, read into dataclasses and validated.

A target's fields are resolved in a cascade: the `[defaults]` table, then the
table of the target it names with `same_as` (if any), then its own table; a
field written later replaces the earlier one whole. So a target states only
what differs.

Every error names the target and the field so that a broken pin is fixed
where it is written, and an unknown field or name suggests the closest known
one. A target's name is an identifier (`NAME`: the cache's files and tox
environments are named after it), `patches` a directory of the checkout
(its links followed: a symlink out of the checkout is refused), a series
file a name in it, and each upstream test a node id under the tree's
`tests/` (`node_id_problem`: never an option, an absolute path, a `..` or
whitespace, since it reaches pytest's command line). Files the pins point
at (series files, local source trees) are checked when they are used, not
here; the source and wheel pins are read by harness.pins.
"""

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from harness import checkout
from harness.errors import TargetError
from harness.pins import (  # the sources and wheels are found here too
    WHEELS,  # noqa: F401
    GitSource,  # noqa: F401
    PathSource,  # noqa: F401
    SdistSource,  # noqa: F401
    Source,
    Wheel,
    hint,
    known,
    parse_source,
    parse_wheels,
    required,
)
from harness.tiers import STREAMS, TIERS, parse_fixes, parse_streams

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
# A target name: letters, digits, '.', '_' and '-', starting with a letter or
# a digit (main, 0.33, 0.24-rc1), at most 64 characters.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


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
            tiers = ", ".join(sorted(self.series))
            raise TargetError(
                f"target {self.name}: no tier {tier!r} in its series table "
                f"(it has: {tiers})"
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
    except RecursionError:
        raise TargetError(f"{path}: arrays or tables nested too deep") from None
    known(f"{path}: table", document, ("defaults", "targets"))
    tables = document.get("targets")
    if not isinstance(tables, dict) or not tables:
        raise TargetError(f"{path} has no [targets.NAME] tables")
    for name in tables:
        if not NAME.fullmatch(name):
            raise TargetError(
                f"{path}: target name {name!r} is not a name: letters, digits, "
                f"'.', '_' and '-', starting with a letter or a digit, at most 64 "
                f"(the harness names files after it)"
            )
    defaults = document.get("defaults", {})
    if not isinstance(defaults, dict):
        raise TargetError(f"{path}: [defaults] must be a table")
    known("[defaults]: field", defaults, DEFAULT_FIELDS)
    root = path.resolve().parent.parent
    resolved: dict[str, dict] = {}
    return {
        name: _parse_target(
            name, {**defaults, **_cascade(name, tables, resolved)}, root
        )
        for name in tables
    }


def get_target(name: str, path: Path | None = None) -> Target:
    targets = load_targets(path)
    if name not in targets:
        known = ", ".join(targets)
        raise TargetError(
            f"unknown target {name!r} (known: {known}){hint(name, targets)}"
        )
    return targets[name]


def _cascade(name: str, tables: dict, resolved: dict) -> dict:
    """A target's own fields over those of the target it is `same_as`, and so
    on down the chain, followed in a loop (a chain of any length); each
    target's fields are kept in ``resolved`` for the next."""
    chain, on_chain = [name], {name}
    while chain[-1] not in resolved:
        table = tables[chain[-1]]
        if not isinstance(table, dict):
            raise TargetError(f"target {chain[-1]}: must be a table")
        known(f"target {chain[-1]}: field", table, FIELDS)
        other = table.get("same_as")
        if other is None:
            resolved[chain[-1]] = dict(table)
            break
        if not isinstance(other, str) or other not in tables:
            raise TargetError(
                f"target {chain[-1]}: same_as names no target: {other!r}"
                f"{hint(str(other), tables)}"
            )
        if other in on_chain:
            shown = chain if len(chain) < 9 else [*chain[:3], "...", *chain[-3:]]
            circle = " -> ".join((*shown, other))
            raise TargetError(
                f"target {chain[-1]}: same_as goes round in a circle: {circle}"
            )
        chain.append(other)
        on_chain.add(other)
    for below, above in zip(reversed(chain), reversed(chain[:-1]), strict=False):
        own = {k: v for k, v in tables[above].items() if k != "same_as"}
        resolved[above] = {**resolved[below], **own}
    return resolved[name]


def _parse_target(name: str, table: dict, root: Path) -> Target:
    series = required(name, table, "series", dict)
    if "default" not in series:
        raise TargetError(f"target {name}: field series needs a 'default' tier")
    for tier, file_name in series.items():
        if tier not in TIERS:
            raise TargetError(
                f"target {name}: field series names tier {tier!r}; tiers are "
                f"{', '.join(TIERS)}{hint(tier, TIERS)}"
            )
        if not isinstance(file_name, str) or not file_name:
            raise TargetError(f"target {name}: field series.{tier} must be a file name")
        if "/" in file_name or file_name in (".", ".."):
            raise TargetError(
                f"target {name}: field series.{tier} must name a file of the "
                f"patches directory, got {file_name!r}"
            )
    source = parse_source(name, required(name, table, "source", dict), root)
    return Target(
        name=name,
        description=required(name, table, "description", str),
        source=source,
        patches_dir=_inside(name, required(name, table, "patches", str), root),
        series=dict(series),
        upstream_tests=_test_list(name, table, "upstream_tests"),
        upstream_tests_full=_test_list(name, table, "upstream_tests_full"),
        fixes=parse_fixes(name, required(name, table, "fixes", dict), series),
        streams=parse_streams(name, table.get("streams", {}), series),
        wheels=parse_wheels(name, table.get("wheels", {})),
    )


def _inside(name: str, patches: str, root: Path) -> Path:
    """The patches directory: a relative path without '..' that, its links
    followed, still lies in the checkout (a link out of it is refused)."""
    if patches.startswith("/") or ".." in patches.split("/"):
        raise TargetError(
            f"target {name}: field patches must be a directory of the checkout "
            f"(a relative path without '..'), got {patches!r}"
        )
    try:
        resolved = (root / patches).resolve()
    except (RuntimeError, OSError) as exc:  # a link loop (3.11: RuntimeError)
        raise TargetError(f"target {name}: field patches {patches!r}: {exc}") from None
    if not resolved.is_relative_to(root.resolve()):
        raise TargetError(
            f"target {name}: field patches {patches!r} leads to {resolved}, "
            f"outside the checkout {root} (a symlink); the series must be the "
            f"checkout's own"
        )
    return root / patches


def _test_list(name: str, table: dict, field: str) -> tuple[str, ...]:
    tests = required(name, table, field, list)
    if not tests or not all(isinstance(test, str) and test for test in tests):
        raise TargetError(
            f"target {name}: field {field} must be a non-empty list of pytest node ids"
        )
    for test in tests:
        if (problem := node_id_problem(test)) is not None:
            raise TargetError(
                f"target {name}: field {field}: {test!r} {problem}; an entry is "
                f"a test of the tree, FILE or FILE::NODE with FILE a relative "
                f"path under tests/"
            )
    return tuple(tests)


def node_id_problem(test: str) -> str | None:
    """Why ``test`` is no pytest node id of a tree's own tests (it reaches
    pytest's command line as one word: an option, a path outside the tree,
    or two words once a shell splits it), else None."""
    file, separator, node = test.partition("::")
    if test.startswith("-"):
        return "starts with '-', which pytest would read as an option"
    if not test.isprintable() or any(character.isspace() for character in test):
        return "holds whitespace or a control character"
    if file.startswith("/"):
        return "is an absolute path"
    parts = file.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "has a '..', '.' or empty part"
    if parts[0] != "tests" or len(parts) < 2:
        return "is not under tests/"
    if separator and not node:
        return "names no test after '::'"
    return None
