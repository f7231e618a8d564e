"""Every consumer subscribed to a real engine's publisher through the
router protocol: the hash-set and content-tree routers, the model of
llm-d's rules, Dynamo's relay and indexer and vllm-router's kv_aware, the
last three at the hash and the cache block size, each request asked of them
before the engine served it (harness.engine.engine_routers, `python -m
harness e2e routers`). Three more engine sessions (released, default tier,
strict tier) beside test_engine_stream.py's, about 90 s each on two cores;
the routers come from the consumers extra, their wheels checked against
tests/consumers/router-wheels.txt by tox.

These tests assert that each pipeline ran on the engine's own stream: every
request asked of every router and served, every event the engine published
received, every batch accounted for, and what each router dropped named by
its own reasons. How well a tier serves a router is printed, not asserted
here (docs/consumers.md).
"""

import os

import pytest

from harness.contract.wire import BlockStored, decode_batch
from harness.engine.e2e import TIERS
from harness.engine.engine import DEFAULT_DTYPE, DEFAULT_TARGET
from harness.engine.engine_routers import BLOCK_SIZED, BLOCK_SIZES, builtin_routers
from harness.engine.score import RELEASED, render_requests, score_end_to_end
from harness.routers import CONSUMER_NAMES, INDEX_NAMES
from harness.routers.real_routers import render

TARGET = os.environ.get("HARNESS_E2E_TARGET", DEFAULT_TARGET)
LABELS = (RELEASED, *TIERS)


@pytest.fixture(scope="module")
def outcome():
    return score_end_to_end(
        TARGET,
        os.environ.get("HARNESS_E2E_DTYPE", DEFAULT_DTYPE),
        builtin_routers(CONSUMER_NAMES),
        tiers=TIERS,
    )


@pytest.fixture(params=LABELS)
def session(request, outcome):
    return outcome.sessions[request.param]


def test_each_session_ran_whole_and_left_nothing(session):
    assert session.returncode == 0, session.log_tail
    assert session.outlived_leader == [] and session.survivors == []
    assert len(session.asked) == len(session.served) > 0
    assert session.stream.sequence_check.incomplete() is None
    assert session.stream.events > 0
    # Every gate was quiet: no batch arrived while the routers were asked.
    assert [a.late for a in session.asked] == [0] * len(session.asked)


def test_every_router_kept_the_protocol_and_answered_every_request(session):
    assert session.errors == {}
    expected = {(name, size) for name in BLOCK_SIZED for size in BLOCK_SIZES}
    assert set(session.runs) == expected | {(name, 0) for name in INDEX_NAMES}
    for run in session.runs.values():
        assert [a.op for a in run.answers] == [a.number for a in session.asked]
        assert [a.truth for a in run.answers] == [
            r.num_cached_tokens for r in session.served
        ]


# What Dynamo's relay keeps (lib/kv-router/src/zmq_wire/filter.rs).
MAIN_ATTENTION = {"full_attention", "mla_attention", "sink_full_attention", None}


def stores(session) -> list:
    return [
        event
        for payload in session.stream.payloads
        for event in decode_batch(payload, "test").events
        if isinstance(event, BlockStored)
    ]


def test_dynamos_relay_received_every_event_and_dropped_by_its_rules(session):
    main = [e for e in stores(session) if e.kv_cache_spec_kind in MAIN_ATTENTION]
    for size in BLOCK_SIZES:
        ledger = session.runs["dynamo", size].ledger
        received = sum(v for k, v in ledger.items() if k.startswith("relay received"))
        assert received == session.stream.events, size
        assert sum(v for k, v in ledger.items() if k.startswith("indexer ")) > 0
        # The Mamba group never reaches the index.
        assert ledger["relay filtered stored: non_main_attention_kind"] == len(
            stores(session)
        ) - len(main)
        # A store whose blocks are not the router's size is emptied: full
        # cache blocks at the hash block size, hash-block stores at the cache's.
        emptied = sum(e.block_size != size for e in main)
        assert (
            ledger["relay forwarded stored with no block: empty_store_blocks"]
            == emptied
            > 0
        ), size


def hashless_batches(session) -> set[int]:
    """Batches that hold a store or removal with no hash."""
    return {
        seq
        for seq, payload in enumerate(session.stream.payloads)
        if any(
            getattr(event, "block_hashes", None) == []
            for event in decode_batch(payload, "test").events
        )
    }


def test_vllm_router_accounted_for_every_batch_by_its_own_reasons(session):
    refused = hashless_batches(session)
    for size in BLOCK_SIZES:
        ledger = session.runs["vllm-router", size].ledger
        # Its decoder refuses a batch whole for one hashless event in it, and
        # applies every other batch.
        assert ledger["batches applied"] == session.stream.sequence - len(refused)
        assert ledger[
            "batch refused whole: KV event hashes must be a nonempty array"
        ] == len(refused)
        held = sum(session.stream.batch_events[seq] for seq in refused)
        assert ledger["events in batches refused whole"] == held
        decisions = sum(v for k, v in ledger.items() if k.startswith("decision: "))
        assert decisions == len(session.asked)
        # Its answer is the chosen worker's credit: not zero only where the
        # indexed worker's lookup hit.
        answers = session.runs["vllm-router", size].answers
        assert sum(a.raw > 0 for a in answers) <= ledger["lookup: hit"]


def test_the_tables_print(outcome, capsys):
    text = render(outcome.table())
    requests = "\n\n".join(render_requests(s) for s in outcome.sessions.values())
    with capsys.disabled():
        print(f"\n{text}\n\n{requests}\nrouters end to end: {outcome.wall_s:.0f} s")
    rows = len(INDEX_NAMES) + len(BLOCK_SIZES) * len(BLOCK_SIZED)
    assert text.count("| `e2e engine` |") == len(LABELS) * rows
