"""Real routers through their own code: Dynamo's relay, event plane and
indexer, and vllm-router's kv_aware policy, fed every workload config's
recorded stream (pristine, default and strict trees of HARNESS_TARGET,
default main) by a local ZMQ publisher, at the hash and each cache block
size (harness.routers.real_routers).

These tests assert that each pipeline ran: every event published reached
the router, every probe got an answer, and the routers' own counts of what
they dropped name the reasons the stream gives them (a Mamba or
sliding-window group, a block size that is not the router's, a parent it
does not hold). Whether a tier helps or hurts a router is measured (the
table is printed) and asserted elsewhere.
"""

import os

import pytest

from harness.routers.real_routers import (
    CONTENT_TREE,
    measure_routers,
    render,
    render_answers,
)
from harness.series.apply import cached_patched_tree
from harness.targets import TIERS, get_target
from harness.trees.sources import pristine_tree
from harness.workloads.drivers import CONFIGS

SEEDS, OPS, PROBES = 1, 30, 2


@pytest.fixture(scope="module")
def table():
    target = get_target(os.environ.get("HARNESS_TARGET", "main"))
    trees = {"pristine": pristine_tree(target)}
    trees |= {tier: cached_patched_tree(target, tier) for tier in TIERS}
    found = measure_routers(
        trees, list(CONFIGS), SEEDS, OPS, ["dynamo", "vllm-router"], PROBES
    )
    print(render(found))
    return found


def cells(table, router):
    return {key: cell for key, cell in table.cells.items() if key[2] == router}


def probes_of(table, config, tree) -> int:
    return table.cells[config, tree, CONTENT_TREE, 0, ""].tally.probes


@pytest.mark.parametrize("router", ["dynamo", "vllm-router"])
def test_every_probe_is_answered_at_every_block_size(table, router):
    found = cells(table, router)
    assert {(config, tree) for config, tree, *_ in found} == {
        (config, tree) for config, tree, *_ in table.cells
    }
    for (config, tree, _, size, kind), cell in found.items():
        assert kind in ("hash", "cache", "other") and size > 0
        assert cell.tally.probes == probes_of(table, config, tree) > 0
        assert len(cell.runs[0].answers) == cell.tally.probes
    kinds = {key[4] for key in found}
    assert {"hash", "cache"} <= kinds


def test_dynamos_relay_received_every_event_and_says_what_it_dropped(table):
    for (config, tree, _, size, _), cell in cells(table, "dynamo").items():
        ledger = cell.ledger
        received = sum(v for k, v in ledger.items() if k.startswith("relay received"))
        assert received == cell.events, (config, tree, size)
        applied = sum(v for k, v in ledger.items() if k.startswith("indexer "))
        assert applied > 0, (config, tree, size)
    totals = table.totals()
    for tree in ("pristine", *TIERS):
        hash_ledger = totals["dynamo", "hash", tree].ledger
        # Every cache block size: the attention group's and the others'.
        cache_ledger = totals["dynamo", "cache", tree].ledger.copy()
        if ("dynamo", "other", tree) in totals:
            cache_ledger.update(totals["dynamo", "other", tree].ledger)
        for ledger in (hash_ledger, cache_ledger):
            # Mamba and sliding-window groups never reach the index.
            assert ledger["relay filtered stored: non_main_attention_kind"] > 0
            # A parent the tree does not hold drops the store.
            assert ledger["indexer stored: parent_block_not_found"] > 0
        # Stores of a block size that is not the router's lose every block:
        # full cache blocks at the hash block size, hash-block stores
        # (partial entries) at the cache block size.
        assert (
            hash_ledger["relay forwarded stored with no block: empty_store_blocks"] > 0
        )
        assert (
            cache_ledger["relay forwarded stored with no block: empty_store_blocks"] > 0
        )


def test_vllm_router_applied_every_batch_and_decided_every_request(table):
    for (config, tree, _, size, _), cell in cells(table, "vllm-router").items():
        ledger = cell.ledger
        refused = sum(
            v for k, v in ledger.items() if k.startswith("batch refused whole")
        )
        assert ledger["batches applied"] + refused == cell.batches, (config, tree)
        # A refused batch loses every event in it, its good ones too.
        assert (ledger["events in batches refused whole"] > 0) == (refused > 0)
        decisions = sum(v for k, v in ledger.items() if k.startswith("decision: "))
        assert decisions == cell.tally.probes, (config, tree, size)
        # The answer read is the chosen worker's credit: never more often
        # not zero than the indexed worker's lookup hit (a hit can be
        # credited 0, capped below the prompt's length).
        credited = sum(a.raw > 0 for run in cell.runs for a in run.answers)
        assert credited <= ledger["lookup: hit"], (config, tree, size)
    pristine = table.totals()["vllm-router", "hash", "pristine"].ledger
    # Pristine streams name parents the router never saw (K1): it skips them.
    assert pristine["index skipped unanchored store: unknown parent"] > 0
    # Released vLLM's Mamba stores with no hash make its decoder refuse the
    # whole batch they are in.
    assert pristine["batch refused whole: KV event hashes must be a nonempty array"]


def test_a_run_prints_request_by_request(table):
    cell = table.cells["pool-16x64", "strict", "dynamo", 16, "hash"]
    text = render_answers(cell.runs[0], limit=12)
    print(text)
    assert text.count("\n") == min(12, len(cell.runs[0].answers)) + 1
