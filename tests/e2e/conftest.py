"""The end-to-end run, once per session, its report printed at the end and
written as JSON.

HARNESS_E2E_TARGET names the target whose release is installed (default
0.32; tox -e e2e-TARGET sets it), HARNESS_E2E_DTYPE the dtype. The tests
that depend on what a tier claims are parametrized from the target's `fixes`
in harness/targets.toml when they are collected.

pytest captures what a fixture prints, so the report (the checker's findings
and the router fidelity of each engine session) goes to the terminal summary
instead, pass or fail. The same report, with the tests' outcome counts, is
written to ``--e2e-report PATH`` (default: reports/e2e-TARGET.json in this
checkout's folder of the harness cache), which `python -m harness ci
releases` renders.
"""

import os
from collections import Counter
from pathlib import Path

import pytest

from harness import cache
from harness.engine.e2e import EndToEnd, check_report_path, end_to_end, write_report
from harness.engine.engine import DEFAULT_DTYPE, DEFAULT_TARGET
from harness.targets import get_target

TARGET = os.environ.get("HARNESS_E2E_TARGET", DEFAULT_TARGET)

_outcome: EndToEnd | None = None
_tests: Counter = Counter()


def pytest_addoption(parser):
    parser.addoption(
        "--e2e-report",
        type=Path,
        help="where to write the run's report as JSON (default: "
        "reports/e2e-TARGET.json in this checkout's folder of the harness "
        "cache)",
    )


def report_path(config) -> Path:
    return config.getoption("--e2e-report") or cache.e2e_report(TARGET)


def pytest_configure(config):
    check_report_path(report_path(config))


def pytest_generate_tests(metafunc):
    """`k4_fixed`: the tiers whose `fixes` include K4; `k4_kept`: the tiers
    whose `fixes` do not; `holdings_tier` and `ancestry_tier`: the tiers whose
    `streams` are the pool's holdings, and those that add ancestry."""
    target = get_target(TARGET)
    fixes = target.fixes
    if "k4_fixed" in metafunc.fixturenames:
        metafunc.parametrize("k4_fixed", [t for t in fixes if "K4" in fixes[t]])
    if "k4_kept" in metafunc.fixturenames:
        metafunc.parametrize("k4_kept", [t for t in fixes if "K4" not in fixes[t]])
    for stream in ("holdings", "ancestry"):
        if f"{stream}_tier" in metafunc.fixturenames:
            metafunc.parametrize(
                f"{stream}_tier", [t for t in fixes if target.stream(t) == stream]
            )


@pytest.fixture(scope="session")
def result() -> EndToEnd:
    global _outcome
    _outcome = end_to_end(TARGET, os.environ.get("HARNESS_E2E_DTYPE", DEFAULT_DTYPE))
    return _outcome


def pytest_runtest_logreport(report):
    """Count each test once: its call's outcome, or "error" for a failing
    set-up or tear-down, or "skipped" for a skip at set-up."""
    if report.when == "call":
        _tests[report.outcome] += 1
    elif report.failed:
        _tests["error"] += 1
    elif report.skipped:
        _tests["skipped"] += 1


def pytest_sessionfinish(session):
    if _outcome is not None:
        write_report(report_path(session.config), _outcome.as_json(dict(_tests)))


def pytest_terminal_summary(terminalreporter, config):
    if _outcome is not None:
        terminalreporter.section("end to end: the engine sessions' streams")
        for line in _outcome.render().splitlines():
            terminalreporter.write_line(line)
        terminalreporter.write_line(f"e2e report written to {report_path(config)}")
