"""Checker rules on hand-built event batches (no vLLM needed)."""

import hashlib
from typing import Any

import pytest
from support.events import GPU, cleared, removed, stored

from harness.contract.checker import (
    PARENT_NEVER_REPORTED,
    PARENT_REMOVED,
    HashModel,
    StreamChecker,
)


def rules(checker):
    return [violation.rule for violation in checker.violations]


def test_chain_of_stores_and_removals_children_first_is_clean():
    checker = StreamChecker()
    checker.apply([stored([1, 2], None), stored([3], 2)])
    checker.apply([removed([3]), removed([2]), removed([1])])
    checker.check_drained()
    assert checker.violations == []
    assert checker.views[(GPU, 0)] == {}


def test_c1_witness_is_the_store_and_its_missing_parent():
    checker = StreamChecker()
    checker.apply([stored([1], None)])
    checker.apply([stored([2], 1), stored([9], 8)])
    [violation] = checker.violations
    assert (violation.rule, violation.batch, violation.event) == ("C1", 1, 1)
    assert violation.hashes == (8, 9)


def test_c1_parent_stored_later_in_the_same_event_list_does_not_count():
    checker = StreamChecker()
    checker.apply([stored([2], 1), stored([1], None)])
    assert rules(checker) == ["C1"]


def test_c2_removal_of_a_hash_never_stored():
    checker = StreamChecker()
    checker.apply([stored([1], None), removed([1, 5])])
    [violation] = checker.violations
    assert (violation.rule, violation.batch, violation.event) == ("C2", 0, 1)
    assert violation.hashes == (5,)


def test_c3_token_count_must_match_hashes_times_block_size():
    checker = StreamChecker()
    checker.apply([stored([1, 2], None, tokens=[0, 1, 2])])
    [violation] = checker.violations
    assert violation.rule == "C3"
    assert "2 hashes x block_size 2 != 3 tokens" in violation.detail


def test_multiset_hash_stays_live_until_removed_as_often_as_stored():
    checker = StreamChecker()
    checker.apply([stored([7], None), stored([7], None)])
    assert checker.duplicate_stores == 1
    checker.apply([removed([7])])
    assert checker.live_count((GPU, 0), 7) == 1
    checker.apply([stored([8], 7)])
    checker.apply([removed([8]), removed([7])])
    assert checker.live_count((GPU, 0), 7) == 0
    assert checker.violations == []
    checker.apply([removed([7])])
    assert rules(checker) == ["C2"]


@pytest.mark.parametrize("track_ancestry", [False, True])
def test_duplicates_and_what_stays_live_do_not_depend_on_ancestry(track_ancestry):
    checker = StreamChecker(track_ancestry=track_ancestry)
    checker.apply([stored([1, 2, 2], None), stored([3, 1], 2)])
    checker.apply([removed([2, 1, 9])])
    assert checker.duplicate_stores == 2
    assert checker.views[(GPU, 0)] == {1: 1, 2: 1, 3: 1}
    assert rules(checker) == ["C2"]
    if track_ancestry:
        assert checker.stored[(GPU, 0)] == {1: (None, 0), 2: (1, 0), 3: (2, 0)}


def test_views_are_separate_per_group_and_medium():
    checker = StreamChecker()
    checker.apply([stored([1], None, group=0)])
    checker.apply([stored([2], 1, group=1)])
    checker.apply([stored([3], 1, medium="CPU")])
    checker.apply([removed([1], group=1)])
    assert rules(checker) == ["C1", "C1", "C2"]


def test_all_blocks_cleared_empties_every_view():
    checker = StreamChecker()
    checker.apply([stored([1], None, group=0), stored([2], None, group=1)])
    checker.apply([cleared()])
    checker.check_drained()
    assert checker.violations == []
    checker.apply([stored([3], 1), removed([2], group=1)])
    assert rules(checker) == ["C1", "C2"]


def test_c5_reports_each_hash_left_live_with_its_count():
    checker = StreamChecker(track_ancestry=True)
    checker.apply([stored([1], None), stored([1], None), stored([2], 1)])
    checker.apply([removed([2]), removed([1])])
    checker.check_drained()
    [violation] = checker.violations
    assert violation.rule == "C5"
    assert violation.hashes == (1,)
    assert "x1" in violation.detail and "batch 0" in violation.detail


def test_c6_held_hashes_must_be_live():
    checker = StreamChecker(track_ancestry=True)
    checker.apply([stored([1], None)])
    checker.check_pool({(GPU, 0): {1, 4}})
    [violation] = checker.violations
    assert (violation.rule, violation.hashes, violation.view) == ("C6", (4,), (GPU, 0))


def test_c6_live_hash_not_held_must_be_an_ancestor_of_a_held_hash():
    checker = StreamChecker(track_ancestry=True)
    # 1 <- 2 <- 3: the pool holds 1 and 3; 2 is an ancestry-only boundary.
    # 5 <- 6: the pool holds neither, so both are orphans.
    checker.apply([stored([1], None), stored([2], 1), stored([3], 2)])
    checker.apply([stored([5], None), stored([6], 5)])
    checker.check_pool({(GPU, 0): {1, 3}})
    assert sorted(v.hashes for v in checker.violations) == [(5,), (6,)]
    assert rules(checker) == ["C6", "C6"]
    assert {v.view for v in checker.violations} == {(GPU, 0)}


def test_check_pool_needs_ancestry():
    with pytest.raises(ValueError):
        StreamChecker().check_pool({})


def toy_chunk_hash(parent: bytes | None, tokens: tuple[int, ...], extra: Any) -> bytes:
    return hashlib.sha256(repr((parent or b"none", tokens, extra)).encode()).digest()


def toy_external(chain: bytes) -> int:
    return int.from_bytes(chain, "big") & ((1 << 64) - 1)


TOY_MODEL = HashModel(2, toy_chunk_hash, toy_external)


def toy_prefix_hashes(tokens: list[int]) -> list[int]:
    """External hash at every 2-token boundary of ``tokens``."""
    chain, hashes = None, []
    for start in range(0, len(tokens), 2):
        chain = toy_chunk_hash(chain, tuple(tokens[start : start + 2]), None)
        hashes.append(toy_external(chain))
    return hashes


def test_c4_accepts_hashes_rebuilt_along_the_parent_chain():
    tokens = [5, 6, 7, 8, 9, 10, 11, 12]
    h = toy_prefix_hashes(tokens)
    checker = StreamChecker(hash_model=TOY_MODEL)
    # One 4-token block (two hash chunks), then a 2-token partial entry.
    checker.apply([stored([h[1]], None, block_size=4, tokens=tokens[:4])])
    checker.apply([stored([h[2]], h[1], tokens=tokens[4:6])])
    checker.apply([stored([h[3]], h[2], tokens=tokens[6:8])])
    assert checker.violations == []


def test_c4_rejects_a_hash_that_its_tokens_do_not_produce():
    tokens = [5, 6, 7, 8]
    h = toy_prefix_hashes(tokens)
    checker = StreamChecker(hash_model=TOY_MODEL)
    checker.apply([stored([h[0]], None, tokens=tokens[:2])])
    checker.apply([stored([h[1]], h[0], tokens=[7, 99])])
    [violation] = checker.violations
    assert violation.rule == "C4"
    assert violation.hashes[0] == h[1]
    assert violation.hashes[1] == toy_prefix_hashes([5, 6, 7, 99])[1]


def test_c4_is_not_checked_on_a_store_whose_tokens_c3_cannot_place():
    tokens = [5, 6, 7, 8]
    h = toy_prefix_hashes(tokens)
    checker = StreamChecker(hash_model=TOY_MODEL)
    # Two hashes announced over three blocks' worth of tokens, as a group
    # with a masked block reports them.
    checker.apply([stored([h[0], h[1]], None, tokens=tokens + [9, 10])])
    assert rules(checker) == ["C3"]


def test_apply_returns_the_violations_of_its_batch():
    checker = StreamChecker()
    assert checker.apply([stored([1], None)]) == []
    [found] = checker.apply([stored([3], 2), stored([4], 1)])
    assert (found.rule, found.batch, found.event) == ("C1", 1, 0)
    assert checker.violations == [found]


def test_c1_cause_says_whether_the_parent_was_ever_reported_in_its_view():
    checker = StreamChecker(track_ancestry=True)
    checker.apply([stored([1], None), removed([1])])
    checker.apply([stored([2], 1), stored([4], 3), stored([5], 1, group=1)])
    assert [v.cause for v in checker.violations] == [
        PARENT_REMOVED,
        PARENT_NEVER_REPORTED,
        PARENT_NEVER_REPORTED,
    ]
    assert str(checker.violations[0]).startswith(
        f"C1 at batch 1 event 0: parent is not live ({PARENT_REMOVED})"
    )


def test_c1_has_no_cause_without_ancestry():
    checker = StreamChecker()
    checker.apply([stored([2], 1)])
    assert checker.violations[0].cause is None
    assert str(checker.violations[0]).startswith("C1 at batch 0 event 0: parent is")


def test_witnesses_per_rule_bound_what_is_kept_not_what_is_counted():
    checker = StreamChecker(witnesses_per_rule=3)
    found = checker.apply([stored([n], 10**6 + n) for n in range(50)])
    assert len(found) == 50  # apply still returns every violation of its batch
    checker.apply([removed([10**7 + n]) for n in range(4)])
    assert checker.counts == {"C1": 50, "C2": 4}
    assert checker.violation_count == 54
    assert [(v.rule, v.event) for v in checker.violations] == [
        ("C1", 0),
        ("C1", 1),
        ("C1", 2),
        ("C2", 0),
        ("C2", 1),
        ("C2", 2),
    ]


def test_violations_by_view_in_order_whatever_the_mix_of_none_and_values():
    from harness.contract.checker import view_order

    checker = StreamChecker()
    checker.apply(
        [
            stored([1], 99, group=0, medium=None),
            stored([2], 98, group=None, medium=GPU),
            stored([3], 97, group=0, medium=GPU),
            stored([4], 96, group=10, medium=GPU),
            stored([5], 95, group=9, medium=GPU),
            removed([6], group=9, medium=GPU),
        ]
    )
    assert checker.counts_by_view() == {
        (None, 0): {"C1": 1},
        (GPU, None): {"C1": 1},
        (GPU, 0): {"C1": 1},
        (GPU, 9): {"C1": 1, "C2": 1},
        (GPU, 10): {"C1": 1},
    }
    assert sorted([(GPU, 2), (None, None), ("CPU", 1)], key=view_order) == [
        (None, None),
        ("CPU", 1),
        (GPU, 2),
    ]


def random_stream(seed: int) -> list[list]:
    """Batches of stores, removals and resets over two groups, a good share
    of them breaking C1, C2 or C3."""
    import random

    from support.events import cleared

    rng = random.Random(seed)
    batches = []
    for _ in range(60):
        batch = []
        for _ in range(rng.choice([1, 1, 2, 5, 12])):
            group = rng.choice([0, 1])
            kind = ("mamba", "full_attention")[group]
            roll = rng.random()
            if roll < 0.5:
                hashes = [rng.randrange(40) for _ in range(rng.randint(0, 3))]
                parent = rng.choice([None, rng.randrange(40)])
                tokens = None if rng.random() < 0.8 else [0] * rng.randrange(5)
                batch.append(
                    stored(hashes, parent, group=group, kind=kind, tokens=tokens)
                )
            elif roll < 0.97:
                batch.append(removed([rng.randrange(40)], group=group))
            else:
                batch.append(cleared())
        batches.append(batch)
    return batches


@pytest.mark.parametrize("seed", range(5))
def test_a_capture_read_as_check_stream_reads_it_finds_what_apply_does(seed):
    from support.events import payloads

    batches = random_stream(seed)
    one_by_one = StreamChecker()
    for batch in batches:
        one_by_one.apply(batch)
    captured = StreamChecker()
    captured.apply_payloads(payloads(*batches))
    assert captured.violations == one_by_one.violations
    assert captured.violations  # the stream breaks rules
    assert captured.view_counts == one_by_one.view_counts
    assert captured.views == one_by_one.views
    assert (captured.batches, captured.events, captured.duplicate_stores) == (
        one_by_one.batches,
        one_by_one.events,
        one_by_one.duplicate_stores,
    )


def test_token_ids_that_are_not_an_array_make_the_capture_unreadable():
    import msgspec

    from harness.errors import UnreadableStream

    event = {
        "type": "BlockStored",
        "block_hashes": [1],
        "parent_block_hash": None,
        "token_ids": "ab",
        "block_size": 2,
        "lora_id": None,
        "medium": GPU,
        "lora_name": None,
    }
    checker = StreamChecker()
    with pytest.raises(UnreadableStream) as caught:
        checker.apply_payloads(msgspec.msgpack.encode([0.0, [event]]))
    assert caught.value.position == "batch 0 event 0"
    assert "token_ids are not an array" in caught.value.reason


def test_a_violation_names_its_events_index_in_a_batch_applied_again_changed():
    checker = StreamChecker()
    batch = [stored([1], None), stored([3], 2)]
    checker.apply(batch)
    batch.insert(0, stored([5], 4))
    checker.apply(batch)
    assert [(v.batch, v.event) for v in checker.violations] == [(0, 1), (1, 0), (1, 2)]
