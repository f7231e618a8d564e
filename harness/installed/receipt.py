"""The receipt `install` leaves beside an installed vLLM, read as data.

It lives with the distribution, in ``NAME.dist-info/kv-events-series/``:
``receipt.json`` (target, tier, release, and each file's pristine and patched
sha256), the pristine files themselves, and a copy of RECORD. Nothing in it
is trusted before it is checked (`receipt_from_json`): its keys and their
types, its words (a target's name, a tier, a release: `status` prints them),
every file a plain path under vllm/, every digest a sha256, at most
`RECEIPT_MAX_BYTES`; every file of it is reached through `Located.info_file`
(no symlink, no ``..``). A receipt RECORD lists but that is gone is refused:
nothing says what the released files were.
"""

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.errors import PackageError
from harness.installed.installed import PACKAGE, Located
from harness.installed.package_files import (
    file_digest,
    plain_relative,
    read_file,
    read_record,
)
from harness.targets import NAME
from harness.tiers import TIERS

RECEIPT_DIR = "kv-events-series"
RECEIPT = "receipt.json"
RECEIPT_KIND = "vllm-kv-events-series receipt"
PRISTINE = "pristine"
RECORD_COPY = "RECORD.orig"


@dataclass(frozen=True)
class Receipt:
    target: str
    tier: str
    release: str
    distribution: str  # "NAME VERSION" it was put on
    files: dict[str, dict[str, str]]  # path -> {"pristine": sha, "patched": sha}
    record_sha256: str

    def as_json(self) -> dict:
        return {"kind": RECEIPT_KIND, **asdict(self)}


def receipt_dir(located: Located) -> Path:
    return located.info_file(RECEIPT_DIR)


def receipt_file(located: Located, name: str) -> Path:
    """A file of the receipt directory (``receipt.json``, ``pristine/vllm/...``),
    refused when reached through a symlink or ``..`` (`Located.info_file`)."""
    return located.info_file(f"{RECEIPT_DIR}/{name}")


# The most a receipt.json may hold: a receipt of a few files is 1-2 KB.
RECEIPT_MAX_BYTES = 1 << 20
_FIELDS = ("target", "tier", "release", "distribution", "record_sha256")
_DIGESTS = ("pristine", "patched")
# What the receipt's words may be, as `install` writes them: each is printed
# (status, uninstall), so none may carry a line or an escape of its own.
_RELEASE = re.compile(r"[0-9A-Za-z.+!_-]{1,64}")
# One patch of a tier installed alone (`e2e routers --each-patch`, `score
# --each-patch`: harness.installed.overlay labels it "NNNN alone").
_ALONE = re.compile(r"[0-9]{4} alone")


def _tier(word: str) -> bool:
    return word in TIERS or _ALONE.fullmatch(word) is not None


_VALUES = (
    ("target", NAME.fullmatch, "a target's name"),
    ("tier", _tier, f"a tier ({', '.join(TIERS)}, or NNNN alone)"),
    ("release", _RELEASE.fullmatch, "a release"),
)


def read_receipt(located: Located) -> Receipt | None:
    """The receipt beside the package, None when there is none and RECORD
    lists none; one that RECORD lists but is gone, or that is not valid data
    (`receipt_from_json`), is refused in one line."""
    path = receipt_file(located, RECEIPT)
    if not path.exists() and not path.is_symlink():
        listed = receipt_listed(located)
        if listed or receipt_dir(located).exists():
            evidence = "RECORD lists it" if listed else "its folder is there"
            raise PackageError(
                f"the series' receipt {path} is missing, though {evidence}"
                f"{_differing_note(located)}; nothing says what to put back: "
                f"reinstall {located.dist.name}=={located.dist.version} with pip"
            )
        return None
    try:
        text = read_file(path, RECEIPT_MAX_BYTES)
        try:
            data = json.loads(text.decode("utf-8"))
        except RecursionError:
            raise ValueError("nested too deep to be a receipt") from None
        receipt = receipt_from_json(data)
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise PackageError(
            f"the receipt {path} cannot be read ({why}); reinstall "
            f"{located.dist.name}=={located.dist.version} with pip to start over"
        ) from None
    here = f"{located.dist.name} {located.dist.version}"
    if receipt.distribution != here:
        raise PackageError(
            f"the receipt {path} is of {receipt.distribution}, not of {here}; "
            f"reinstall {located.dist.name}=={located.dist.version} with pip"
        )
    return receipt


def receipt_from_json(data) -> Receipt:
    """A receipt from its parsed JSON, checked as data: the keys `install`
    writes and no other, strings where strings are, every file a plain path
    under vllm/ with a sha256 of each kind (ValueError saying what is not)."""
    if not isinstance(data, dict):
        raise ValueError(f"a JSON {_json_type(data)}, not an object")
    if data.get("kind") != RECEIPT_KIND:
        raise ValueError("not a receipt of this project")
    expected = {"kind", "files", *_FIELDS}
    if missing := sorted(expected - set(data)):
        raise ValueError(f"no {', '.join(map(repr, missing))}")
    if extra := sorted(set(data) - expected):
        raise ValueError(f"unknown key {extra[0]!r}")
    for field in _FIELDS:
        if not isinstance(data[field], str):
            raise ValueError(f"{field!r} is a JSON {_json_type(data[field])}")
    for field, valid, kind in _VALUES:
        if not valid(data[field]):
            raise ValueError(f"{field!r} is {data[field][:80]!r}, not {kind}")
    if not _is_sha256(data["record_sha256"]):
        raise ValueError("'record_sha256' is not a sha256")
    files = data["files"]
    if not isinstance(files, dict) or not files:
        kind = _json_type(files) if not isinstance(files, dict) else "empty object"
        raise ValueError(f"'files' is a JSON {kind}, not an object of files")
    for path, digests in files.items():
        if not path.startswith(PACKAGE) or not plain_relative(path):
            raise ValueError(f"{path!r} is not a plain path under {PACKAGE}")
        if not isinstance(digests, dict) or set(digests) != set(_DIGESTS):
            raise ValueError(
                f"the digests of {path!r} are not an object of "
                f"{' and '.join(map(repr, _DIGESTS))}"
            )
        if not all(_is_sha256(digests[kind]) for kind in _DIGESTS):
            raise ValueError(f"a digest of {path!r} is not a sha256")
    return Receipt(
        **{field: data[field] for field in _FIELDS},
        files={path: dict(digests) for path, digests in files.items()},
    )


def _is_sha256(value) -> bool:
    return (
        isinstance(value, str)
        and len(value) == 64
        and all(c in "0123456789abcdef" for c in value)
    )


def _json_type(value) -> str:
    for kind, name in ((bool, "boolean"), (int, "number"), (float, "number")):
        if isinstance(value, kind):
            return name
    return {dict: "object", list: "array", str: "string"}.get(type(value), "null")


def receipt_listed(located: Located) -> bool:
    """RECORD lists a receipt: `install` put one here."""
    name = f"{located.dist.dist_info.name}/{RECEIPT_DIR}/{RECEIPT}"
    return name in read_record(located.dist.record)


def _differing_note(located: Located) -> str:
    _, differing = record_mismatches(located)
    if not differing:
        return ", and every file of vllm/ is as RECORD says"
    shown = ", ".join(differing[:3]) + (" ..." if len(differing) > 3 else "")
    return f", and {len(differing)} file(s) of vllm/ differ from RECORD ({shown})"


def file_states(located: Located, receipt: Receipt) -> dict[str, str]:
    """Path -> "patched", "released" or "changed" for each file of the receipt."""
    states = {}
    for path, digests in receipt.files.items():
        actual = file_digest(located.package_file(path))
        states[path] = {
            digests["patched"]: "patched",
            digests["pristine"]: "released",
        }.get(actual, "changed")
    return states


def record_mismatches(located: Located) -> tuple[int, list[str]]:
    """(files checked, paths whose sha256 is not RECORD's) over vllm/."""
    checked, differing = 0, []
    for path, recorded in read_record(located.dist.record).items():
        if recorded is None or not path.startswith("vllm/"):
            continue
        checked += 1
        if file_digest(located.package_file(path)) != recorded:
            differing.append(path)
    return checked, differing
