"""What the harness adds to running the upstream tests: a warm
``python -m harness test --target main`` against bare pytest of the same
upstream files in the same patched tree.

    python benchmarks/harness_overhead.py [--target main] [--tier default]
        [-n auto] [--warm-up] [--json FILE]

Warm means the pristine outcomes of the selection are cached for this
interpreter (key: source, selection, Python and torch versions) and the
patched tree exists, so the verb runs the patched selection and the
conformance suite only. When the cache is cold the script stops, unless
``--warm-up`` (run the verb once first, not measured) or ``--cold`` (measure
anyway). It runs each measured command ONCE (together they take minutes):
first bare pytest, ``python -m pytest -p no:cacheprovider -n N FILES`` in the
patched tree with ``PYTHONPATH=<tree> VLLM_TARGET_DEVICE=cpu``, then the verb
with ``-n N``.
Every line of the verb's output is timestamped, which splits its wall time
into start-up, the patched upstream run, the conformance suite and the
verdict. The load average is printed before and after each command.

No figure is asserted; the script only prints.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import benchlib


def outcomes_cache(target) -> Path | None:
    """The verb's cache file for the pristine outcomes of the ci selection
    (as harness.suites.upstream.pristine_outcomes keys it)."""
    from harness import cache

    identity = target.source.identity()
    if identity is None:
        return None
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "not installed"
    key = json.dumps(
        {
            "source": identity,
            "tests": target.selection("ci"),
            "python": platform.python_version(),
            "torch": torch_version,
        }
    )
    return cache.outcomes(hashlib.sha256(key.encode()).hexdigest())


def run_timestamped(command: list[str], **kwargs) -> tuple[float, int, list]:
    """Run, echoing output; return wall seconds, exit code and
    ``(seconds since start, line)`` for every output line."""
    started = time.monotonic()
    lines = []
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        **kwargs,
    ) as process:
        for line in process.stdout:
            lines.append((time.monotonic() - started, line.rstrip("\n")))
            print(line, end="", flush=True)
    return time.monotonic() - started, process.returncode, lines


def verb(args) -> list[str]:
    return [
        sys.executable,
        "-m",
        "harness",
        "test",
        "--target",
        args.target,
        "--tier",
        args.tier,
        "-n",
        args.workers,
    ]


def first_at(lines: list, prefix: str) -> float | None:
    return next((at for at, line in lines if line.startswith(prefix)), None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/harness_overhead.py")
    parser.add_argument("--target", default="main")
    parser.add_argument("--tier", default="default", choices=("default", "strict"))
    parser.add_argument("-n", dest="workers", default="auto")
    parser.add_argument(
        "--warm-up",
        action="store_true",
        help="if the pristine outcomes are not cached, run the verb once first",
    )
    parser.add_argument(
        "--cold", action="store_true", help="measure even if the cache is not warm"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)

    from harness.series.apply import cached_patched_tree
    from harness.targets import get_target

    target = get_target(args.target)
    tests = list(target.selection("ci"))
    cached = outcomes_cache(target)
    warm = cached is not None and cached.is_file()
    tree = cached_patched_tree(target, args.tier)
    print(f"patched tree: {tree}")
    print(f"pristine outcomes cached: {cached if warm else 'no'}")
    warm_up = None
    if not warm and args.warm_up:
        print("warming up: the verb once, cold (not the measured run)", flush=True)
        wall, rc, _ = run_timestamped(verb(args), cwd=benchlib.REPO_ROOT)
        warm_up = {"wall": wall, "rc": rc}
        warm = cached.is_file()
    if not warm and not args.cold:
        print(
            "not warm: pass --warm-up (runs the verb once first), or run "
            f"`python -m harness test --target {args.target}` yourself",
            file=sys.stderr,
        )
        return 2

    loads = {"before bare pytest": benchlib.machine()}
    print(benchlib.machine_line(loads["before bare pytest"]), flush=True)
    bare_command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-n",
        args.workers,
        *tests,
    ]
    print(f"$ (cd {tree} && {' '.join(bare_command[1:])})", flush=True)
    bare_wall, bare_rc, _ = run_timestamped(
        bare_command, cwd=tree, env=benchlib.tree_env(tree)
    )
    loads["after bare pytest"] = benchlib.machine()
    print(benchlib.machine_line(loads["after bare pytest"]), flush=True)

    verb_command = verb(args)
    print(f"$ {' '.join(verb_command[1:])}", flush=True)
    verb_wall, verb_rc, lines = run_timestamped(verb_command, cwd=benchlib.REPO_ROOT)
    loads["after the verb"] = benchlib.machine()
    print(benchlib.machine_line(loads["after the verb"]), flush=True)

    upstream_at = first_at(lines, "harness: upstream tests, patched tree")
    conformance_at = first_at(lines, "harness: conformance suite")
    verdict_at = next(
        (at for at, line in reversed(lines) if line.startswith("target ")), None
    )
    phases = {}
    if upstream_at is not None and conformance_at is not None:
        phases = {
            "start-up (pristine outcomes from the cache)": upstream_at,
            "patched upstream selection": conformance_at - upstream_at,
            "conformance suite": (verdict_at or verb_wall) - conformance_at,
            "verdict": verb_wall - (verdict_at or verb_wall),
        }
    result = {
        "tree": str(tree),
        "tests": tests,
        "bare": {"command": bare_command[1:], "wall": bare_wall, "rc": bare_rc},
        "verb": {
            "command": verb_command[1:],
            "wall": verb_wall,
            "rc": verb_rc,
            "phases": phases,
        },
        "machine": loads,
        "warm_up": warm_up,
    }
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")

    print()
    for name, info in loads.items():
        print(f"{name}: {benchlib.machine_line(info)}")
    if warm_up:
        print(
            f"warm-up (cold verb, not measured): {warm_up['wall']:.1f} s wall "
            f"(exit {warm_up['rc']})"
        )
    print(f"bare pytest: {bare_wall:.1f} s wall (exit {bare_rc})")
    print(f"harness test: {verb_wall:.1f} s wall (exit {verb_rc})")
    for name, seconds in phases.items():
        print(f"  {name}: {seconds:.1f} s")
    print(f"ratio harness test / bare pytest: {verb_wall / bare_wall:.2f}")
    if phases:
        upstream = phases["patched upstream selection"]
        print(
            f"ratio of the verb's patched upstream run / bare pytest: "
            f"{upstream / bare_wall:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
