"""`score`: its command line (a router is required, a command line split as
a shell splits words), what it asks of the engine session, and its exit
status: 0 every request exact, 1 otherwise, 23 for a router that broke the
protocol (after printing the rest), all without an engine."""

import json

import pytest

from harness import cli
from harness.engine import score as score_module
from harness.engine.engine_routers import RouterSpec
from harness.errors import RouterProtocolError
from harness.verbs import e2e as e2e_verb


class Outcome:
    """A `Scored` stand-in: ``exact`` and the errors it reports."""

    def __init__(self, exact=True, errors=()):
        self._exact, self._errors = exact, list(errors)

    def exact(self):
        return self._exact

    def errors(self):
        return self._errors

    def as_json(self):
        return {"exact": self._exact}


@pytest.fixture
def asked(monkeypatch):
    """What score_end_to_end was asked; it returns ``asked["outcome"]``."""
    asked = {"outcome": Outcome()}

    def score_end_to_end(target, dtype, specs, seed, tiers, released, alone, model):
        asked.update(target=target, specs=specs, tiers=tiers, released=released)
        asked.update(model=model)
        return asked["outcome"]

    monkeypatch.setattr(score_module, "score_end_to_end", score_end_to_end)
    monkeypatch.setattr(score_module, "render", lambda scored: "the score")
    monkeypatch.setattr(e2e_verb, "require_engine", lambda *args: None)
    return asked


def test_without_a_router_it_is_a_usage_error(asked, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["score"])
    assert exited.value.code == 2
    assert "give a router: --router-cmd CMD or --router NAME" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["./router 'unclosed", "   "])
def test_a_command_line_that_does_not_split_is_a_usage_error(command, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["score", "--router-cmd", command])
    assert exited.value.code == 2


def test_the_routers_and_sessions_asked_for_are_what_runs(asked, capsys):
    status = cli.main(
        ["score", "--router-cmd", "./my-router --mode 'a b'", "--router", "dynamo",
         "--session", "strict", "--session", "released", "--json"]
    )  # fmt: skip
    assert status == 0
    assert json.loads(capsys.readouterr().out) == {"exact": True}
    labels = [(spec.label, spec.block_size) for spec in asked["specs"]]
    assert labels == [("dynamo", 32), ("dynamo", 128), ("router 1", 0)]
    assert asked["specs"][-1] == RouterSpec(
        "router 1", ("./my-router", "--mode", "a b")
    )
    assert (asked["tiers"], asked["released"]) == (("strict",), True)


def test_one_request_not_exact_exits_1(asked, capsys):
    asked["outcome"] = Outcome(exact=False)
    assert cli.main(["score", "--router", "hash-set"]) == 1
    assert capsys.readouterr().out == "the score\n"
    assert (asked["tiers"], asked["released"]) == ((), True)


def test_a_router_that_broke_the_protocol_exits_23_after_the_score(asked, capsys):
    error = RouterProtocolError("mine", "late", "no 'answer' within 60 s")
    asked["outcome"] = Outcome(exact=True, errors=[("released", error)])
    assert cli.main(["score", "--router-cmd", "./mine"]) == 23
    out, err = capsys.readouterr()
    assert out == "the score\n"
    assert "error: router mine: late: no 'answer' within 60 s" in err
