"""The checker given a consumer's reading, and the shape of K6 it marks."""

import pytest
from support.events import GPU, cleared, removed, stored

from harness.contract.checker import OTHER_BLOCK_SIZE, StreamChecker
from harness.contract.reading import (
    HASHLESS_SHAPE,
    K6_SHAPE,
    Reading,
    keeps_k6,
)

ATTENTION = Reading("attention", "", kinds=frozenset({"full_attention"}))


def shapes(checker):
    return [(violation.rule, violation.shape) for violation in checker.violations]


@pytest.mark.parametrize("kind", ["mamba", "sliding_window"])
def test_a_c1_in_a_sparse_group_whose_tokens_span_its_hashes_has_k6s_shape(kind):
    checker = StreamChecker()
    checker.apply([stored([2], 1, kind=kind)])
    assert shapes(checker) == [("C1", K6_SHAPE)]


def test_a_c1_that_also_breaks_c3_or_is_of_attention_has_no_shape():
    checker = StreamChecker()
    checker.apply(
        [
            stored([2], 1, kind="mamba", tokens=[0]),  # K4 shows C3 too
            stored([4], 3, kind="full_attention", group=1),
        ]
    )
    assert shapes(checker) == [("C1", None), ("C3", None), ("C1", None)]


def test_a_reading_drops_the_views_of_other_kinds_and_counts_their_events():
    checker = StreamChecker(reading=ATTENTION)
    checker.apply(
        [
            stored([1], None, group=0, kind="mamba"),
            stored([3], 2, group=0, kind="mamba"),
            removed([9], group=0),
            stored([5], None, group=1, kind="full_attention"),
        ]
    )
    assert shapes(checker) == []
    assert checker.skipped == {(GPU, 0)}
    assert checker.views == {(GPU, 1): {5: 1}}
    assert checker.left_out == {((GPU, 0), "attention drops mamba groups"): 3}


def test_a_view_first_seen_by_a_removal_is_dropped_once_a_store_names_its_kind():
    checker = StreamChecker(reading=ATTENTION)
    checker.apply([removed([7], group=0)])  # kind unknown yet: judged
    checker.apply([stored([1], None, group=0, kind="mamba"), removed([1], group=0)])
    assert checker.skipped == {(GPU, 0)}
    assert (GPU, 0) not in checker.views
    assert checker.view_kinds[(GPU, 0)] == "mamba"


def test_a_kind_is_learned_from_the_first_store_after_removals_in_one_batch():
    checker = StreamChecker()
    checker.apply([removed([7], group=0), stored([1], None, group=0, kind="mamba")])
    assert checker.view_kinds == {(GPU, 0): "mamba"}


def test_stores_of_another_block_size_are_dropped_and_their_removals_expected():
    reading = Reading("sized", "", block_size=4)
    checker = StreamChecker(reading=reading)
    checker.apply(
        [
            stored([1], None, block_size=4),
            stored([2], 1, block_size=2),  # dropped: its hash is never live
            stored([3], 2, block_size=4),  # so its child has no parent here
            removed([3, 2, 1]),  # removing the dropped hash is no C2
            removed([2]),  # but a second time is
        ]
    )
    assert [(v.rule, v.event) for v in checker.violations] == [("C1", 2), ("C2", 4)]
    assert checker.left_out == {((GPU, 0), OTHER_BLOCK_SIZE): 1}


def test_a_group_reading_judges_hashless_stores_of_the_groups_it_drops():
    reading = Reading(
        "group 0", "", groups=frozenset({0}), refuses_hashless_batches=True
    )
    checker = StreamChecker(reading=reading)
    checker.apply(
        [
            stored([1], None, group=0),
            stored([], None, group=1, tokens=[0, 1]),  # refuses the batch
            stored([3], 2, group=1),  # not read
        ]
    )
    assert shapes(checker) == [("C3", HASHLESS_SHAPE)]
    assert checker.skipped == {(GPU, 1)}


def test_a_reset_empties_what_a_reading_dropped_too():
    checker = StreamChecker(reading=Reading("sized", "", block_size=4))
    checker.apply([stored([1], None, block_size=2), cleared(), removed([1])])
    assert [violation.rule for violation in checker.violations] == ["C2"]


@pytest.mark.parametrize(
    ("fixes", "kept"),
    [
        (["K1", "K2", "K3", "K4", "K7"], True),  # the strict tier
        (["K1"], False),  # the default tier: K4 takes K6's shape
        ([], False),
        (["K1", "K2", "K3", "K4", "K6", "K7"], False),  # a tier fixing K6
    ],
)
def test_only_a_tier_that_fixes_every_other_c1_class_keeps_k6(fixes, kept):
    assert keeps_k6(fixes) is kept
