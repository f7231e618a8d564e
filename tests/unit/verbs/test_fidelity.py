"""The fidelity verb's usage errors: one line and status 2, before anything
is fetched or run."""

import subprocess
import sys

import pytest
from support import REPO_ROOT


def harness(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seeds", "0"], "take a positive number"),
        (["--tree", "nameless"], "give NAME=PATH"),
        (["--tree", "strict=/somewhere"], "give NAME=PATH with a new NAME"),
        (["--tree", "mine=/no/such/tree"], "holds no vllm package"),
    ],
)
def test_bad_options_are_refused_before_any_work(args, message):
    result = harness("fidelity", *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "harness: fidelity:" not in result.stderr  # no workload started
