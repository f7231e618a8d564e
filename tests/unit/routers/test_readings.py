"""What each consumer reads (harness.routers.readings), held against the
in-process consumers themselves: a stream its reading judges sound is one
the consumer takes whole, where the check models it."""

import pytest
from support.events import cleared, removed, stored

from harness.contract.checker import StreamChecker
from harness.contract.judgement import Judgement, Tier
from harness.routers import CONSUMER_NAMES
from harness.routers.llmd_model import LlmdModel
from harness.routers.readings import reading
from harness.routers.router import (
    FULL_ATTENTION,
    MAMBA,
    EngineLayout,
    GroupLayout,
    RouterIndex,
)

LAYOUT = EngineLayout(2, 2, (GroupLayout(MAMBA, 2), GroupLayout(FULL_ATTENTION, 2)))
# The e2e model's layout: group 0 Mamba, group 1 attention. A Mamba store
# after a block skipped before its call (K6's shape), then a clean chain in
# the attention group.
MAMBA_C1 = [
    stored([1], None, group=0, kind="mamba"),
    stored([3], 2, group=0, kind="mamba"),
    stored([1], None, group=1, kind="full_attention"),
    stored([2], 1, group=1, kind="full_attention"),
    removed([2], group=1),
]
# A store after a reset that names a hash stored before it.
AFTER_RESET = [
    stored([1], None, group=0, kind="full_attention"),
    cleared(),
    stored([2], 1, group=0, kind="full_attention"),
]


def violations(name: str, events, block_size=None) -> int:
    checker = StreamChecker(reading=reading(name, block_size))
    checker.apply(events)
    return Judgement(checker, Tier(None)).violation_count


def test_every_consumer_fidelity_measures_has_a_reading_of_its_name():
    for name in CONSUMER_NAMES:
        assert reading(name, 2).name == name


def test_an_unknown_consumer_is_refused_with_the_names():
    with pytest.raises(ValueError, match="hash-set, content-tree"):
        reading("aibrix")


@pytest.mark.parametrize(
    ("name", "sound"),
    [
        ("hash-set", True),  # needs no parent
        ("content-tree", False),  # reads every group, refuses the store
        ("dynamo", True),  # its relay drops the Mamba group
        ("llm-d-model", True),  # skips the Mamba group's stores
        ("vllm-router", False),  # group 0 is the Mamba group here
    ],
)
def test_a_c1_in_a_mamba_group_is_unsound_only_for_who_reads_it(name, sound):
    assert (violations(name, MAMBA_C1, block_size=2) == 0) is sound


@pytest.mark.parametrize(
    ("name", "sound"), [("hash-set", True), ("content-tree", False)]
)
def test_a_store_under_a_hash_the_reset_cleared(name, sound):
    assert (violations(name, AFTER_RESET) == 0) is sound


def test_the_content_tree_refuses_what_its_reading_finds():
    for events, found in ((MAMBA_C1, 1), (AFTER_RESET, 1)):
        index = RouterIndex(refuse_orphans=True)
        index.apply_all(events)
        assert index.refused == found == violations("content-tree", events)


def test_the_llmd_model_drops_nothing_its_reading_calls_sound():
    model = LlmdModel(LAYOUT, 2)
    for event in MAMBA_C1:
        model.apply(event)
    assert model.ledger()["stores dropped: parent not mapped"] == 0
    assert model.ledger()["stores skipped: kind not attention"] == 2
    assert violations("llm-d-model", MAMBA_C1) == 0


def test_dynamo_at_another_block_size_reads_no_store_of_this_stream():
    checker = StreamChecker(reading=reading("dynamo", 4))
    checker.apply(MAMBA_C1)
    assert Judgement(checker, Tier(None)).violation_count == 0
    assert sum(checker.left_out.values()) == 4  # two Mamba, two attention stores
