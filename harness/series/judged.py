"""What a verdict was judged on, so that only a verdict of the tree at hand
is quoted (`export`, `ci releases`).

A verdict records two digests in its provenance (`tree_key`): the tier's
series (its series file and the bytes of every patch it names,
`Series.digest`) and the harness code that judged it (the modules of the
harness package that ran, and the checkout's conformance suite). Not the git
revision: a commit that changes neither (the docs, a benchmark) keeps its
verdicts, and a checkout with uncommitted patches gets none of another's.
"""

import hashlib
from pathlib import Path

from harness import checkout
from harness.series.model import load_series
from harness.targets import Target

TREE_KEYS = ("series_sha256", "harness_sha256")
# The harness package whose code is running.
PACKAGE = Path(__file__).resolve().parent.parent


def code_digest() -> str:
    """sha256 over the harness package's modules and the conformance suite's
    files (each with its path), in a fixed order."""
    digest = hashlib.sha256()
    for base, name in ((PACKAGE, "harness"), (checkout.conformance_suite(), "suite")):
        files = sorted(base.rglob("*")) if base.is_dir() else []
        for path in files:
            if "__pycache__" in path.parts or not path.is_file():
                continue
            if base == PACKAGE and path.suffix != ".py":
                continue  # the pins and the hub stand-in judge nothing
            digest.update(f"{name}/{path.relative_to(base).as_posix()}\0".encode())
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def tree_key(target: Target, tier: str) -> dict[str, str]:
    """The digests a verdict of ``target``'s ``tier`` taken here records."""
    return {
        "series_sha256": load_series(target, tier).digest(),
        "harness_sha256": code_digest(),
    }


def not_of_tree(recorded: dict, key: dict[str, str]) -> str | None:
    """Why a verdict whose provenance is ``recorded`` was not judged on the
    tree ``key`` names (`tree_key`), or None when it was."""
    if not all(isinstance(recorded.get(name), str) for name in TREE_KEYS):
        return "it records no digest of its series and harness (an older verdict)"
    if recorded["series_sha256"] != key["series_sha256"]:
        return "its series file or patches differ from this checkout's"
    if recorded["harness_sha256"] != key["harness_sha256"]:
        return "the harness code that judged it differs from this checkout's"
    return None
