"""The fidelity verb's usage errors: one line and status 2, before anything
is fetched or run."""

import pytest
from support.cli import harness

from harness import cli
from harness.trees import preflight


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


@pytest.mark.parametrize(
    ("router", "needs_wheels"),
    [("llm-d-model", False), ("hash-set", False), ("dynamo", True)],
)
def test_only_the_real_routers_need_the_consumers_extra(
    tmp_path, monkeypatch, capsys, router, needs_wheels
):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(preflight, "VLLM_REQUIREMENTS", ("harness_has_no_torch",))
    monkeypatch.setitem(preflight.EXTRAS, "consumers", ("harness_has_no_wheels",))
    assert cli.main(["fidelity", "--router", router]) == 15
    assert ("harness_has_no_wheels" in capsys.readouterr().err) == needs_wheels
