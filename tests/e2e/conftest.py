"""The end-to-end run, once per session, and its report printed at the end.

pytest captures what a fixture prints, so the report (the checker's findings
and the router fidelity of each engine session) goes to the terminal summary
instead, pass or fail.
"""

import os

import pytest

from harness.runs.e2e import EndToEnd, end_to_end
from harness.runs.engine import DEFAULT_DTYPE, DEFAULT_TARGET

_outcome: EndToEnd | None = None


@pytest.fixture(scope="session")
def result() -> EndToEnd:
    global _outcome
    _outcome = end_to_end(
        os.environ.get("HARNESS_E2E_TARGET", DEFAULT_TARGET),
        os.environ.get("HARNESS_E2E_DTYPE", DEFAULT_DTYPE),
    )
    return _outcome


def pytest_terminal_summary(terminalreporter):
    if _outcome is not None:
        terminalreporter.section("end to end: the engine sessions' streams")
        for line in _outcome.render().splitlines():
            terminalreporter.write_line(line)
