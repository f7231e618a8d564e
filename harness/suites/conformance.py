"""The project's conformance suite (tests/conformance) on two trees.

The suite runs the same seeded workloads in the pristine and the patched tree
and holds the patched stream to the contract; it is told the trees, the
target and the tier through the environment, and writes its per-class counts
to HARNESS_CONFORMANCE_REPORT.
"""

import json
import os
import tempfile
from pathlib import Path

from harness import checkout
from harness.log import progress
from harness.suites.upstream import run_pytest
from harness.targets import Target
from harness.verdict import FAILING, Conformance


def conformance_suite() -> Path:
    return checkout.conformance_suite()


def run_conformance(
    target: Target,
    tier: str,
    pristine: Path,
    patched: Path,
    log: Path | None = None,
    echo: bool = False,
) -> Conformance:
    suite = conformance_suite()
    if not suite.is_dir():
        progress(f"conformance: not present ({suite})")
        return Conformance("not present")
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "conformance.json"
        returncode, outcomes = run_pytest(
            checkout.root(),
            [str(suite)],
            {
                **os.environ,
                "HARNESS_TARGET": target.name,
                "HARNESS_TIER": tier,
                "HARNESS_PRISTINE_TREE": str(pristine.resolve()),
                "HARNESS_PATCHED_TREE": str(patched.resolve()),
                "HARNESS_CONFORMANCE_REPORT": str(report),
            },
            "conformance suite",
            log,
            echo,
        )
        data = json.loads(report.read_text()) if report.is_file() else None
    values = list(outcomes.values())
    failed = sum(values.count(outcome) for outcome in FAILING)
    if not values:
        status = "no tests"
    elif returncode == 0 and not failed:
        status = "passed"
    else:
        status = "failed"
    return Conformance(status, values.count("passed"), failed, data)
