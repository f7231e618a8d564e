"""Shared helpers for the benchmark scripts (imported from benchmarks/).

- the machine: nproc, CPU model and load average, printed with every figure;
- the trees to compare: ``--tree LABEL=PATH`` or, by default, the harness's
  cached pristine and patched trees of target main;
- child processes that run inside one vLLM tree and answer JSON requests
  line by line (vLLM logs to stdout, so replies go to a private copy of it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(1, str(REPO_ROOT))


# --------------------------------------------------------------------------
# The machine
# --------------------------------------------------------------------------


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()


def machine() -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu_model(),
        "python": sys.version.split()[0],
        "loadavg": [round(value, 2) for value in load_average()],
    }


def machine_line(info: dict[str, Any] | None = None) -> str:
    info = info or machine()
    one, five, fifteen = info["loadavg"]
    return (
        f"machine: nproc {info['nproc']}, {info['cpu']}, Python {info['python']}, "
        f"load average {one} {five} {fifteen}"
    )


# --------------------------------------------------------------------------
# Trees
# --------------------------------------------------------------------------


def add_tree_argument(parser: argparse.ArgumentParser) -> None:
    """The repeatable ``--tree LABEL=PATH`` option that ``parse_trees`` reads."""
    parser.add_argument(
        "--tree",
        action="append",
        metavar="LABEL=PATH",
        help="a vLLM tree, the first is the baseline (repeat; default: the "
        "harness's pristine, default and strict trees of main)",
    )


def parse_trees(specs: list[str] | None, tiers: tuple[str, ...]) -> dict[str, Path]:
    """``LABEL=PATH`` specs, in order; by default the harness's cached trees
    of target main: ``pristine`` and one per tier in ``tiers``."""
    if specs:
        trees = {}
        for spec in specs:
            label, sep, path = spec.partition("=")
            if not sep or not label or not path:
                raise SystemExit(f"--tree wants LABEL=PATH, got {spec!r}")
            trees[label] = Path(path).resolve()
        return trees
    from harness.series.apply import cached_patched_tree
    from harness.targets import get_target
    from harness.trees.sources import pristine_tree

    target = get_target("main")
    trees = {"pristine": pristine_tree(target)}
    for tier in tiers:
        trees[tier] = cached_patched_tree(target, tier)
    return trees


def tree_env(tree: Path, **extra: str) -> dict[str, str]:
    """The environment that runs Python inside ``tree``, the harness's
    (harness.trees.env), with the hash seed pinned as for every process whose
    stream is compared with another tree's."""
    from harness.trees.env import STREAM_ENV
    from harness.trees.env import tree_env as harness_tree_env

    return harness_tree_env(tree, **{**STREAM_ENV, **extra})


# --------------------------------------------------------------------------
# Child processes
# --------------------------------------------------------------------------


class Child:
    """A ``python SCRIPT --child`` process inside one tree, one JSON request
    per line on stdin, one JSON reply per line."""

    def __init__(self, script: Path, tree: Path, log: Path, **env: str):
        self.tree = tree
        self.log_file = log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, str(script), "--child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log_file,
            env=tree_env(tree, **env),
            text=True,
        )
        self.log = log

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        reply = json.loads(line) if line else {"error": "the child exited"}
        if "error" in reply:
            tail = "\n".join(self.log.read_text().splitlines()[-20:])
            raise RuntimeError(f"{self.tree}: {reply['error']}\n{tail}")
        return reply

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()
        self.log_file.close()


@contextmanager
def children(
    script: Path, trees: dict[str, Path], prefix: str, **env: str
) -> Iterator[dict[str, Child]]:
    """A `Child` per tree, each logging into a scratch folder named
    ``prefix...``; every child closed and the folder removed on the way out."""
    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    started: dict[str, Child] = {}
    try:
        for label, tree in trees.items():
            started[label] = Child(script, tree, scratch / f"{label}.log", **env)
        yield started
    finally:
        for child in started.values():
            child.close()
        shutil.rmtree(scratch, ignore_errors=True)


def serve_requests() -> Iterator[tuple[dict[str, Any], Any]]:
    """In a child: yield ``(request, reply)`` pairs; call ``reply(obj)``.

    Points stdout at stderr so that nothing but replies reaches the parent.
    """
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    def reply(obj: dict[str, Any]) -> None:
        replies.write(json.dumps(obj) + "\n")
        replies.flush()

    for line in sys.stdin:
        yield json.loads(line), reply


# --------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return statistics.median(values)


def spread(values: list[float]) -> str:
    """``median (min-max)`` of ratios, three decimals."""
    return f"{median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def run_main(args, child, run, report) -> int:
    """A benchmark's main after its arguments: the child loop when this is a
    child, else ``run``, its raw figures to ``--json`` if asked, ``report``."""
    if args.child:
        return child()
    result = run(args)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    report(result)
    return 0
