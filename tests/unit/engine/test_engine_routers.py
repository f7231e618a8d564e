"""The pieces of the real-engine router session that run without an engine
or a router: the request gate, the harness's own subscriber, the answers
paired with what the engine served, the content-tree router at each gate."""

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
    RoutersSession,
    index_run,
    render_requests,
    router_run,
)
from harness.engine.engine_stream import EngineStream, Gate
from harness.engine.session import free_port
from harness.errors import E2EError
from harness.routers import ROUTER_NAMES, real_routers

HBS = HASH_BLOCK_SIZE


def test_every_router_has_an_adapter_on_replays_and_on_an_engine():
    assert tuple(real_routers.ROUTERS) == ROUTER_NAMES
    assert tuple(engine_routers.ROUTERS) == ROUTER_NAMES


@pytest.mark.parametrize("answer, stops", [("go", False), ("stop", True)])
def test_the_engine_waits_at_the_gate_until_told_to_go(answer, stops):
    gate = Gate()
    outcome = {}

    def engine():
        try:
            request_gate(gate.endpoint)(3, "shared", [5, 6])
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
        assert asked == (3, "shared", [5, 6])
        assert outcome == {}  # still waiting
        gate.socket.send(answer.encode())
        thread.join(10)
    finally:
        gate.close()
    assert ("stopped" in outcome) == stops and ("went" in outcome) != stops


def test_the_harness_subscriber_connects_to_the_engines_bound_endpoint():
    stream = EngineStream(free_port())
    context = zmq.Context()
    engine = context.socket(zmq.PUB)
    try:
        assert stream.engine_endpoint.startswith("tcp://*:")
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


class Stream:
    """What `EngineStream` holds after a session, built by hand."""

    def __init__(self, *payloads):
        self.payloads = list(payloads)
        self.sequence = len(payloads)
        self.events = 3


def served(tokens, hashes, hit):
    return ServedRequest("shared", tokens, hashes, 0.0, hit)


def a_session():
    """Two requests of 3 hash blocks: the first asked before any batch, the
    second after a store of the first two hash blocks in one cache block."""
    stream = Stream(payload(stored([11, 12], None, HBS, kind="full_attention")))
    tokens = list(range(3 * HBS))
    asked = [
        Asked(0, "shared", tokens, 0, {("dynamo", BLOCK_SIZE): 0}),
        Asked(1, "shared", tokens, 1, {("dynamo", BLOCK_SIZE): 3 * HBS}),
    ]
    requests = [served(tokens, [11, 12, 13], 0), served(tokens, [11, 12, 13], 2 * HBS)]
    return RoutersSession("strict", 0, 1.0, stream, asked, requests, [], [], "")


def test_a_routers_answers_are_bounded_and_paired_with_what_was_served():
    session = a_session()
    run = router_run(session, ("dynamo", BLOCK_SIZE), Counter(seen=1))
    assert (run.batches, run.events, run.ledger) == (1, 3, Counter(seen=1))
    assert [(a.op, a.truth, a.raw) for a in run.answers] == [
        (0, 0, 0),
        (1, 2 * HBS, 3 * HBS),
    ]
    # At most num_tokens - 1, at the hash block: two hash blocks.
    assert [a.predicted for a in run.answers] == [0, 2 * HBS]
    assert [a.verdict for a in run.answers] == ["exact", "exact"]


def test_the_content_tree_router_knows_only_the_batches_held_at_each_gate():
    run = index_run(a_session())
    assert [a.raw for a in run.answers] == [0, 2 * HBS]
    assert run.ledger["stores indexed"] == 1


def test_each_request_is_one_row_with_every_routers_prediction():
    session = a_session()
    session.runs[("dynamo", BLOCK_SIZE)] = router_run(
        session, ("dynamo", BLOCK_SIZE), Counter()
    )
    session.runs[("content-tree", 0)] = index_run(session)
    text = render_requests(session)
    assert f"| engine hit | dynamo {BLOCK_SIZE} | content-tree |" in text
    row = f"| 1 | shared | {3 * HBS} | {2 * HBS} | {2 * HBS} | {2 * HBS} |"
    assert text.splitlines()[-1] == row
