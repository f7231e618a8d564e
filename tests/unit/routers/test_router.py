"""The index routers: what they index from events (parent-refusing or every
announced hash), and vLLM's lookup rules over what they hold."""

import pytest
from support.events import cleared, removed, stored

from harness.routers.router import (
    FULL_ATTENTION,
    MAMBA,
    SLIDING_WINDOW,
    EngineLayout,
    GroupLayout,
    RouterIndex,
    hash_sets,
    predict,
)

# A request's hash at each hash-block boundary: H[i] ends at (i + 1) * hbs.
H = [f"h{end}".encode() for end in range(1, 33)]


def layout(*groups, hbs=2, alignment=2):
    return EngineLayout(hbs, alignment, tuple(groups))


def held_at(*boundaries, hbs=2):
    """The request's hashes at these token boundaries."""
    return {H[boundary // hbs - 1] for boundary in boundaries}


def hit(engine, holding_by_group, num_tokens):
    return predict(engine, hash_sets(holding_by_group), H, num_tokens)


FULL_6 = GroupLayout(FULL_ATTENTION, 6)


# -- the index ------------------------------------------------------------


def test_index_takes_a_chain_and_refuses_an_unknown_parent():
    index = RouterIndex()
    index.apply(stored([1, 2], None))
    index.apply(stored([3], 2))
    index.apply(stored([9], 8))  # parent never seen: not indexed
    view = index.views["GPU", 0]
    assert (view[1], view[2], view[3], view[9]) == (1, 1, 1, 0)
    assert index.refused == 1
    assert index.refused_views == {("GPU", 0)}


def test_index_counts_copies_and_ignores_removals_it_cannot_place():
    index = RouterIndex()
    index.apply(stored([1], None))
    index.apply(stored([1], None))
    index.apply(removed([1]))
    index.apply(removed([7]))  # never indexed: ignored
    assert index.views["GPU", 0][1] == 1
    assert index.views["GPU", 0][7] == 0


def test_views_are_per_group_and_a_clear_empties_them_all():
    index = RouterIndex()
    index.apply(stored([1], None, group=0))
    index.apply(stored([5], 1, group=1))  # 1 lives in group 0 only
    assert index.refused_views == {("GPU", 1)}
    holding = index.holding("GPU")
    assert holding[0](1) and not holding[1](5)
    index.apply(cleared())
    assert index.views == {} and index.refused_views == set()


def test_a_store_of_several_hashes_is_placed_whole():
    index = RouterIndex()
    index.apply(stored([1, 2, 3], None, block_size=4))
    index.apply(stored([4], 3))
    assert all(index.views["GPU", 0][h] == 1 for h in (1, 2, 3, 4))


def test_hash_set_index_takes_a_store_under_an_unknown_parent():
    index = RouterIndex(refuse_orphans=False)
    index.apply(stored([9], 8))  # parent never seen: indexed all the same
    assert index.views["GPU", 0][9] == 1
    assert (index.refused, index.orphans, index.refused_views) == (0, 1, set())


def test_hash_set_index_counts_copies_on_removal_and_is_cleared():
    index = RouterIndex(refuse_orphans=False)
    index.apply(stored([1], None))
    index.apply(stored([1], 7))
    index.apply(removed([1]))
    assert index.holding("GPU")[0](1)  # one copy left
    index.apply(removed([1]))
    assert not index.holding("GPU")[0](1)
    index.apply(stored([2], 5))
    index.apply(cleared())
    assert index.views == {}


# -- full attention ---------------------------------------------------------


def test_full_attention_runs_full_blocks_then_the_highest_boundary_inside():
    engine = layout(FULL_6)
    assert hit(engine, {0: held_at(6, 12, 16)}, 18) == (16, (16,))
    assert hit(engine, {0: held_at(6, 12, 14)}, 18).combined == 14


def test_full_attention_stops_at_the_first_missing_full_block():
    # Block 12 is held but block 6 is not: the engine hits nothing past 4,
    # whatever later boundaries the router holds.
    engine = layout(FULL_6)
    assert hit(engine, {0: held_at(4, 12, 16)}, 18).combined == 4
    assert hit(engine, {0: held_at(12, 16)}, 18).combined == 0


def test_a_hit_never_covers_the_whole_request():
    engine = layout(FULL_6)
    assert hit(engine, {0: held_at(6, 12)}, 12).combined == 6
    assert hit(engine, {0: held_at(6, 10, 12)}, 12).combined == 10
    assert hit(engine, {0: held_at(6, 12)}, 13).combined == 12


def test_full_attention_aligned_coarser_than_its_block_rounds_down():
    # Blocks of 2 (the hash block), hits in units of 6: no partial hits.
    engine = layout(GroupLayout(FULL_ATTENTION, 2), alignment=6)
    assert hit(engine, {0: held_at(2, 4, 6, 8, 10)}, 18).combined == 6
    assert hit(engine, {0: held_at(2, 4, 8)}, 18).combined == 0


# -- Mamba and sliding window ------------------------------------------------


def test_mamba_needs_the_state_at_exactly_the_hit():
    engine = layout(GroupLayout(MAMBA, 6))
    # The highest held boundary below the cap, whatever is held before it.
    assert hit(engine, {0: held_at(10)}, 18).combined == 10
    assert hit(engine, {0: held_at(4, 16)}, 17).combined == 16
    assert hit(engine, {0: held_at(4, 18)}, 18).combined == 4


def test_mamba_at_block_alignment_takes_only_aligned_block_ends():
    engine = layout(GroupLayout(MAMBA, 2), alignment=6)
    assert hit(engine, {0: held_at(8, 10)}, 18).combined == 0
    assert hit(engine, {0: held_at(6, 10)}, 18).combined == 6


def test_sliding_window_needs_its_window_of_blocks_at_an_aligned_end():
    # Window 5 over blocks of 2: cdiv(4, 2) = 2 blocks; hits in units of 4.
    engine = layout(GroupLayout(SLIDING_WINDOW, 2, sliding_window=5), alignment=4)
    assert hit(engine, {0: held_at(6, 8)}, 18).combined == 8
    # The block before 12 is missing; 8 has its window.
    assert hit(engine, {0: held_at(6, 8, 12)}, 18).combined == 8
    # The run from the start is a hit even when shorter than the window.
    assert hit(engine, {0: held_at(2, 4, 10)}, 18).combined == 4
    assert hit(engine, {0: held_at(2, 10)}, 18).combined == 0


# -- several groups -----------------------------------------------------------


def test_combined_hit_is_the_longest_every_group_serves():
    engine = layout(GroupLayout(MAMBA, 6), FULL_6)
    holding = {0: held_at(8, 14), 1: held_at(6, 12, 16)}
    # Full attention serves up to 16; Mamba's highest state at or below is 14.
    assert hit(engine, holding, 18) == (14, (14, 16))
    holding[0] = held_at(8, 17 + 1)
    assert hit(engine, holding, 18).combined == 8


def test_groups_of_one_spec_are_looked_up_together():
    engine = layout(FULL_6, FULL_6)
    holding = {0: held_at(6, 12), 1: held_at(6)}
    assert hit(engine, holding, 18) == (6, (6, 6))


def test_a_group_the_router_never_saw_holds_nothing():
    engine = layout(FULL_6, GroupLayout(MAMBA, 6))
    assert hit(engine, {0: held_at(6, 12)}, 18) == (0, (12, 0))


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ((GroupLayout("linear", 6),), "is not one of"),
        ((GroupLayout(SLIDING_WINDOW, 6),), "needs its window"),
        ((GroupLayout(FULL_ATTENTION, 5),), "not a multiple"),
    ],
)
def test_layout_refuses_what_vllm_would_not_build(groups, message):
    with pytest.raises(ValueError, match=message):
        layout(*groups)
