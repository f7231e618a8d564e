"""The fidelity verb's usage errors: one line and status 2, before anything
is fetched or run."""

import pytest
from support.cli import harness


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
