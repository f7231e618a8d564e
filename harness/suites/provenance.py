"""Where and when a verdict was taken, for the tables built from verdicts
(`python -m harness ci releases`)."""

import datetime
import os
import platform
from importlib.metadata import PackageNotFoundError, version

from harness import checkout, processes


def revision() -> str:
    """The checkout's commit, ``-dirty`` when tracked files differ from it,
    or what stands in for one."""
    root = checkout.root()
    try:
        commit = processes.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root)
        changed = processes.run(["git", "diff", "--quiet", "HEAD"], cwd=root)
    except OSError:
        return "unknown (no git)"
    if commit.returncode:
        return "unknown (not a git checkout)"
    return commit.stdout.strip() + ("-dirty" if changed.returncode else "")


def machine() -> str:
    """CPU architecture, cores, Python and torch versions."""
    try:
        torch = f", torch {version('torch')}"
    except PackageNotFoundError:
        torch = ""
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}{torch}"
    )


def provenance() -> dict[str, str]:
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "revision": revision(),
        "machine": machine(),
    }
