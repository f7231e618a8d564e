"""What Dynamo's RadixTree predicts for a request, beside the content-tree router.

On hand-built events: the seed report's 1800-token case, pristine and with
the series' ancestry. On the workloads (pristine, default and strict trees of
HARNESS_TARGET, default main): Dynamo never predicts more than the reference
router, group by group. It holds a subset of what the reference indexes (it
refuses the stores the reference refuses, counts no copies, drops a node's
subtree with it, and is sent no store that breaks C3) and asks more of it (a
path from the root, where the reference applies vLLM's rules).
"""

import os

import pytest
from dynamo._core import RadixTree
from support.events import removed, stored

from harness.routers.dynamo import DynamoAdapter
from harness.routers.fidelity_table import dynamo_predictions, probe_runs
from harness.series.apply import cached_patched_tree
from harness.targets import TIERS, get_target
from harness.trees.sources import pristine_tree
from harness.workloads.drivers import CONFIGS

HBS, BLOCK = 128, 1536
H1536, H1664, H1792 = 11, 12, 13
PROMPT = list(range(1800))


def seed_example(with_ancestry: bool) -> DynamoAdapter:
    adapter = DynamoAdapter(RadixTree())
    adapter.apply(stored([H1536], None, BLOCK, tokens=PROMPT[:1536]))
    if with_ancestry:
        adapter.apply(stored([H1664], H1536, HBS, tokens=PROMPT[1536:1664]))
    adapter.apply(stored([H1792], H1664, HBS, tokens=PROMPT[1664:1792]))
    return adapter


def matched(adapter: DynamoAdapter, tokens: list[int]) -> int:
    return adapter.matched_tokens(("GPU", 0), tokens, BLOCK, HBS, len(tokens) - 1)


def test_pristine_tree_cannot_place_the_entry():
    assert matched(seed_example(with_ancestry=False), PROMPT) == 1536


def test_ancestry_lets_the_tree_match_the_entry():
    adapter = seed_example(with_ancestry=True)
    assert matched(adapter, PROMPT) == 1792
    # A request that stops between the boundaries matches the ancestry
    # boundary, which the engine does not hold: the trade the series makes.
    assert matched(adapter, PROMPT[:1700]) == 1664
    # A request that leaves the prefix inside the first block matches nothing.
    assert matched(adapter, [7] + PROMPT[1:]) == 0


def test_a_removed_block_takes_its_subtree_from_the_match():
    adapter = seed_example(with_ancestry=True)
    adapter.apply(removed([H1536]))
    assert matched(adapter, PROMPT) == 0


@pytest.fixture(scope="module")
def workload_runs():
    target = get_target(os.environ.get("HARNESS_TARGET", "main"))
    trees = {"pristine": pristine_tree(target)}
    trees |= {tier: cached_patched_tree(target, tier) for tier in TIERS}
    return list(probe_runs(trees, list(CONFIGS), seeds=1, ops=150))


def test_dynamo_never_predicts_more_than_the_reference(workload_runs):
    assert workload_runs
    more = []
    for config, tree, records, replay in workload_runs:
        predictions = dynamo_predictions(records, replay.layout)
        assert len(predictions) == len(replay.outcomes) > 0
        for per_group, outcome in zip(predictions, replay.outcomes, strict=True):
            for group, predicted in enumerate(per_group):
                if predicted > outcome.predicted.per_group[group]:
                    more.append((config, tree, outcome.op, group))
    assert more == [], more[:5]
