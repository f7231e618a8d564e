"""The pieces of the real-router adapters that run without the routers: the
publisher's framing, Prometheus counters, Dynamo's ledger names, vllm-router's
log lines and the stub workers."""

import json
import urllib.request
from collections import Counter

import msgspec
import pytest
import zmq
from support.events import run_start, stored
from support.probes import SETUP, START, H, op, probe

from harness.contract.records import ProbeRecord
from harness.contract.wire import decode_batch
from harness.routers import metrics
from harness.routers.dynamo_relay import free_port
from harness.routers.loop import Answer, RouterRun
from harness.routers.metrics import dynamo_ledger
from harness.routers.publisher import StreamPublisher, batch_payload
from harness.routers.real_routers import (
    RoutersTable,
    block_sizes,
    choice,
    render_matrix,
    run_real_router,
)
from harness.routers.vllm_router import (
    ADVANCED,
    ANSI,
    DECISION,
    SKIPPED,
    UNDECODED,
    StubWorkers,
    prompt_text,
    rendered,
)

PAGE = """\
# HELP dynamo_component_kv_publisher_zmq_filtered_events_total filtered
# TYPE dynamo_component_kv_publisher_zmq_filtered_events_total counter
dynamo_component_kv_publisher_zmq_filtered_events_total{dynamo_namespace="a",\
event_type="stored",reason="non_main_attention_kind"} 3
dynamo_component_kv_publisher_zmq_events_total{event_type="stored",\
stage="received"} 5
dynamo_component_kv_publisher_zmq_events_total{event_type="removed",\
stage="received"} 2
dynamo_component_kv_cache_events_applied{event_type="stored",status="ok"} 1
dynamo_component_kv_cache_events_applied{event_type="stored",\
status="allocation_failed"} 0
vllm_router_kv_placement_lookups_total{result="hit"} 7
"""


def test_prometheus_samples_are_read_with_their_labels():
    found = metrics.samples(PAGE)
    assert len(found) == 6
    name = "dynamo_component_kv_publisher_zmq_events_total"
    assert metrics.total(found, name) == 7
    assert metrics.total(found, name, event_type="stored") == 5
    assert metrics.select(found, "vllm_router_kv_placement_lookups_total") == [
        ({"result": "hit"}, 7.0)
    ]


def test_dynamos_counters_become_the_ledger_by_its_own_reasons():
    found = [
        (name.removeprefix("dynamo_component_"), labels, value)
        for name, labels, value in metrics.samples(PAGE)
    ]
    assert dynamo_ledger(found) == Counter(
        {
            "relay filtered stored: non_main_attention_kind": 3,
            "relay received stored": 5,
            "relay received removed": 2,
            "indexer stored: ok": 1,
        }
    )


def test_a_batch_holds_the_events_byte_for_byte_in_vllms_framing():
    event = stored([7, 8], 6, block_size=2, tokens=[1, 2, 3, 4])
    data = msgspec.msgpack.encode(event)
    payload = batch_payload([data, data], ts=2.5)
    assert msgspec.msgpack.decode(payload)[2] is None  # three elements, rank nil
    batch = decode_batch(payload, "test")
    assert batch.ts == 2.5 and batch.events == [event, event]
    assert payload.endswith(data + b"\xc0")


def test_the_publisher_waits_for_a_subscription_and_numbers_its_batches():
    with StreamPublisher() as publisher:
        context = zmq.Context()
        subscriber = context.socket(zmq.SUB)
        subscriber.connect(publisher.endpoint)
        subscriber.setsockopt(zmq.SUBSCRIBE, b"")
        try:
            publisher.wait_for_subscribers(1)
            data = msgspec.msgpack.encode(stored([7], None))
            assert [publisher.send([data]), publisher.send([])] == [0, 1]
            first = subscriber.recv_multipart()
            second = subscriber.recv_multipart()
        finally:
            subscriber.close(linger=0)
            context.term()
    assert [int.from_bytes(m[1], "big") for m in (first, second)] == [0, 1]
    assert decode_batch(first[2], "test").events == [stored([7], None)]


def test_block_sizes_an_operator_would_choose():
    start = run_start(
        hash_block_size=16,
        block_sizes=[64, 16, 64, 256],
        group_kinds=["full_attention", "full_attention", "mamba", "sliding_window"],
    )
    assert block_sizes(start) == {
        16: "hash block, group 1 block",
        64: "group 0 block, group 2 block",
        256: "group 3 block",
    }
    assert [choice(size, start) for size in (16, 64, 256)] == [
        "hash",
        "cache",
        "other",
    ]


def test_free_port_stays_below_what_dynamo_reads():
    assert 20000 <= free_port() < 32768


LOG = [
    "\x1b[2m2026-12-01 17:13:04\x1b[0m DEBUG vllm_router_rs::policies::kv_aware: "
    'src/policies/kv_aware.rs:1314: KV prefix decision outcome="prefix_cost" '
    'worker="http://127.0.0.1:18101" input_tokens=12 new_prefill_tokens=4 '
    "credited_prefix_tokens=8 used_binding=false",
    "2026-12-01 17:12:37 DEBUG vllm_router_rs::kv_index::subscriber: "
    "src/kv_index/subscriber.rs:377: kv_index live sequence advanced "
    "source=http://127.0.0.1:18101 rank=0 seq=41",
    "2026-12-01 17:19:16 DEBUG vllm_router_rs::kv_index::indexer: "
    "src/kv_index/indexer.rs:167: kv_index: unknown parent; skipping unanchored "
    "store parent_seq=i:999",
]


def test_vllm_router_log_lines_are_read():
    decision, advanced, skipped = (ANSI.sub("", line) for line in LOG)
    assert DECISION.search(decision).groupdict() == {
        "outcome": "prefix_cost",
        "worker": "http://127.0.0.1:18101",
        "credited": "8",
    }
    assert ADVANCED.search(advanced)["seq"] == "41"
    assert SKIPPED.search(skipped).groups() == ("unknown parent", "unanchored store")
    assert DECISION.search(advanced) is None and SKIPPED.search(decision) is None
    refused = "WARN vllm_router_rs::kv_index::subscriber: kv_index decode batch: bad"
    assert UNDECODED.search(refused).group(1) == "bad"


@pytest.mark.parametrize("tokens", [[0, 5, 1023], [7] * 20, []])
def test_prompts_render_back_to_their_tokens(tokens):
    assert rendered(prompt_text(tokens)) == tokens


def test_stub_workers_render_a_prompt_as_vllms_render_endpoint_does():
    workers = StubWorkers()
    try:
        body = json.dumps({"model": "m", "prompt": prompt_text([3, 1, 4])}).encode()
        request = urllib.request.Request(
            f"{workers.urls[1]}/v1/completions/render",
            body,
            {"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert json.loads(response.read())[0]["token_ids"] == [3, 1, 4]
        with urllib.request.urlopen(f"{workers.urls[0]}/v1/models", timeout=10) as r:
            assert json.loads(r.read())["data"][0]["id"]
    finally:
        workers.close()


def test_the_pinned_router_wheels_are_the_extras_versions():
    import tomllib

    from support import REPO_ROOT

    pins = [
        line.split()[0]
        for line in (REPO_ROOT / "tests/consumers/router-wheels.txt")
        .read_text()
        .splitlines()
        if line and not line.startswith("#")
    ]
    extra = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["consumers"]
    assert pins == ["ai-dynamo-runtime==1.6.1", "vllm-router==0.1.17"]
    assert set(pins) <= set(extra)
    for line in (
        (REPO_ROOT / "tests/consumers/router-wheels.txt").read_text().splitlines()
    ):
        if line and not line.startswith("#"):
            assert len(line.split("--hash=sha256:")[1]) == 64


def test_the_llm_d_model_runs_in_process_at_its_canonical_block_size():
    records = [START, SETUP, op(0, stored([H[2]], None, block_size=6))]
    records.append(ProbeRecord(0, [probe(12, hit=6)]))
    assert [a.raw for a in run_real_router("llm-d-model", records, 2).answers] == [6]
    assert [a.raw for a in run_real_router("llm-d-model", records, 4).answers] == [4]


def test_the_matrix_is_tree_by_consumer_in_requests_and_tokens():
    table = RoutersTable(1, 1, 1)
    for tree, raw in (("pristine", 4), ("strict", 10)):
        run = RouterRun("c", 0)
        run.answers = [Answer.of(0, "prompt", 12, 8, raw, 2)]
        table.add("c", tree, "llm-d-model", 16, "cache", run)
        table.add("c", tree, "hash-set", 0, "", run)
    assert render_matrix(table).splitlines() == [
        "| consumer | pristine | strict |",
        "| --- | ---: | ---: |",
        "| llm-d-model, cache block | 0/1 · 0 (+0) · 1 (-4) | 0/1 · 1 (+2) · 0 (-0) |",
        "| hash-set | 0/1 · 0 (+0) · 1 (-4) | 0/1 · 1 (+2) · 0 (-0) |",
    ]
