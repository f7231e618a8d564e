"""Checker rules on hand-built event batches (no vLLM needed)."""

import hashlib
from typing import Any

import msgspec
import pytest

from harness.stream import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    HashModel,
    KVEventBatch,
    StreamChecker,
    UnreadableStream,
    decode_batches,
    split_payloads,
)

GPU = "GPU"


def stored(hashes, parent, tokens_per_hash=2, group=0, medium=GPU, tokens=None):
    return BlockStored(
        block_hashes=list(hashes),
        parent_block_hash=parent,
        token_ids=list(range(len(hashes) * tokens_per_hash))
        if tokens is None
        else tokens,
        block_size=tokens_per_hash,
        lora_id=None,
        medium=medium,
        lora_name=None,
        group_idx=group,
    )


def removed(hashes, group=0, medium=GPU):
    return BlockRemoved(block_hashes=list(hashes), medium=medium, group_idx=group)


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
    checker.apply([AllBlocksCleared()])
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
    assert (violation.rule, violation.hashes) == ("C6", (4,))


def test_c6_live_hash_not_held_must_be_an_ancestor_of_a_held_hash():
    checker = StreamChecker(track_ancestry=True)
    # 1 <- 2 <- 3: the pool holds 1 and 3; 2 is an ancestry-only boundary.
    # 5 <- 6: the pool holds neither, so both are orphans.
    checker.apply([stored([1], None), stored([2], 1), stored([3], 2)])
    checker.apply([stored([5], None), stored([6], 5)])
    checker.check_pool({(GPU, 0): {1, 3}})
    assert sorted(v.hashes for v in checker.violations) == [(5,), (6,)]
    assert rules(checker) == ["C6", "C6"]


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
    checker.apply([stored([h[1]], None, tokens_per_hash=4, tokens=tokens[:4])])
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


def encode_batches(*event_lists) -> bytes:
    encoder = msgspec.msgpack.Encoder()
    return b"".join(
        encoder.encode(KVEventBatch(ts=float(index), events=events))
        for index, events in enumerate(event_lists)
    )


def test_split_payloads_finds_each_payload_offset():
    first = encode_batches([stored([1], None)])
    data = encode_batches([stored([1], None)], [removed([1])], [])
    offsets = [offset for offset, _ in split_payloads(data)]
    assert offsets[:2] == [0, len(first)]
    assert len(offsets) == 3
    assert [len(batch.events) for _, batch in decode_batches(data)] == [1, 1, 0]


def test_truncated_payload_names_its_start_offset():
    data = encode_batches([stored([1], None)], [removed([1])])
    cut = len(encode_batches([stored([1], None)]))
    with pytest.raises(UnreadableStream) as caught:
        list(decode_batches(data[: cut + 3]))
    assert caught.value.position == f"byte {cut}"


def test_unknown_event_tag_is_unreadable_input():
    class BlockMoved(msgspec.Struct, tag=True):
        block_hashes: list[int]

    class FutureBatch(msgspec.Struct, array_like=True):
        ts: float
        events: list[BlockMoved]

    good = encode_batches([stored([1], None)])
    data = good + msgspec.msgpack.encode(FutureBatch(0.0, [BlockMoved([1])]))
    with pytest.raises(UnreadableStream) as caught:
        list(decode_batches(data))
    assert caught.value.position == f"byte {len(good)}"
    assert "BlockMoved" in caught.value.reason


def test_fields_added_by_later_releases_are_ignored():
    class LaterBlockStored(msgspec.Struct, tag="BlockStored"):
        block_hashes: list[int]
        parent_block_hash: int | None
        token_ids: list[int]
        block_size: int
        lora_id: int | None
        medium: str | None
        lora_name: str | None
        group_idx: int | None
        skipped_parent_block_hash: int | None

    class LaterBatch(msgspec.Struct, array_like=True):
        ts: float
        events: list[LaterBlockStored]
        data_parallel_rank: int
        publisher_id: str

    event = LaterBlockStored([1], None, [0, 1], 2, None, GPU, None, 0, 42)
    data = msgspec.msgpack.encode(LaterBatch(1.0, [event], 0, "p"))
    [(_, batch)] = list(decode_batches(data))
    assert batch.events == [stored([1], None)]
    assert batch.data_parallel_rank == 0


def test_c4_is_not_checked_on_a_store_whose_tokens_c3_cannot_place():
    tokens = [5, 6, 7, 8]
    h = toy_prefix_hashes(tokens)
    checker = StreamChecker(hash_model=TOY_MODEL)
    # Two hashes announced over three blocks' worth of tokens, as a group
    # with a masked block reports them.
    checker.apply([stored([h[0], h[1]], None, tokens=tokens + [9, 10])])
    assert rules(checker) == ["C3"]
