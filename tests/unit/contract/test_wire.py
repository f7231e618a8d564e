"""Decoding captured payloads without vLLM."""

import msgspec
import pytest
from support.events import GPU, payloads, removed, stored

from harness.contract.wire import (
    checked_events,
    decode_batches,
    split_payloads,
    token_count,
)
from harness.errors import UnreadableStream


def test_split_payloads_finds_each_payload_offset():
    first = payloads([stored([1], None)])
    data = payloads([stored([1], None)], [removed([1])], [])
    offsets = [offset for offset, _ in split_payloads(data)]
    assert offsets[:2] == [0, len(first)]
    assert len(offsets) == 3
    assert [len(batch.events) for _, batch in decode_batches(data)] == [1, 1, 0]


def test_truncated_payload_names_its_start_offset():
    data = payloads([stored([1], None)], [removed([1])])
    cut = len(payloads([stored([1], None)]))
    with pytest.raises(UnreadableStream) as caught:
        list(decode_batches(data[: cut + 3]))
    assert caught.value.position == f"byte {cut}"


def test_unknown_event_tag_is_unreadable_input():
    class BlockMoved(msgspec.Struct, tag=True):
        block_hashes: list[int]

    class FutureBatch(msgspec.Struct, array_like=True):
        ts: float
        events: list[BlockMoved]

    good = payloads([stored([1], None)])
    data = good + msgspec.msgpack.encode(FutureBatch(0.0, [BlockMoved([1])]))
    with pytest.raises(UnreadableStream) as caught:
        list(decode_batches(data))
    assert caught.value.position == f"byte {len(good)}"
    assert "BlockMoved" in caught.value.reason


def test_payloads_before_a_byte_that_is_not_msgpack_come_first():
    good = payloads([stored([1], None)], [removed([1])])
    with pytest.raises(UnreadableStream) as caught:
        list(split_payloads(good + b"\xc1"))
    assert caught.value.position == f"byte {len(good)}"
    seen = []
    with pytest.raises(UnreadableStream):
        seen.extend(batch.events for _, batch in decode_batches(good + b"\xc1"))
    assert seen == [[stored([1], None)], [removed([1])]]


def test_a_payload_not_a_batch_is_reported_before_a_later_framing_error():
    data = msgspec.msgpack.encode({"not": "a batch"}) + b"\xc1"
    with pytest.raises(UnreadableStream) as caught:
        list(decode_batches(data))
    assert caught.value.position == "byte 0"
    assert caught.value.reason.startswith("not a KVEventBatch: ")


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


def test_framing_reads_a_stream_a_chunk_at_a_time(monkeypatch):
    import io

    from harness.contract import wire

    data = payloads([stored([1], None)], [removed([1])], [], [stored([7], None)])
    whole = list(split_payloads(data))
    monkeypatch.setattr(wire, "READ_CHUNK_BYTES", 3)
    assert list(split_payloads(io.BytesIO(data))) == whole
    assert b"".join(payload for _, payload in whole) == data


def test_a_payload_over_the_size_limit_is_refused(monkeypatch):
    from harness.contract import wire

    small = payloads([stored([1], None)])
    large = payloads([stored(list(range(100)), None)])
    monkeypatch.setattr(wire, "MAX_PAYLOAD_BYTES", len(small) + 8)
    with pytest.raises(UnreadableStream) as caught:
        list(split_payloads(small + large))
    assert caught.value.position == f"byte {len(small)}"
    assert caught.value.reason == (
        f"a payload of over {len(small) + 8} bytes: not a KVEventBatch"
    )


def test_a_payload_over_the_limit_is_the_fault_even_before_garbage(monkeypatch):
    from harness.contract import wire

    small = payloads([stored([1], None)])
    large = payloads([stored(list(range(100)), None)])
    monkeypatch.setattr(wire, "MAX_PAYLOAD_BYTES", len(small) + 8)
    seen = []
    with pytest.raises(UnreadableStream) as caught:
        seen.extend(split_payloads(small + large + small + b"\xc1"))
    assert caught.value.position == f"byte {len(small)}"
    assert "a payload of over" in caught.value.reason
    assert seen == [(0, small)]


@pytest.mark.parametrize("count", [0, 3, 15, 16, 70_000])
def test_a_stores_token_count_is_read_from_its_array_header(count):
    from harness.contract.wire import decode_batch

    event = stored([1], None, block_size=count, tokens=[5] * count)
    [head] = decode_batch(payloads([event]), "here", tokens=False).events
    assert type(head).__name__ == "StoredHead"
    assert token_count(head.token_ids) == count == token_count(event.token_ids)


def test_token_ids_that_are_not_an_array_have_no_count():
    raw = msgspec.msgpack.decode(msgspec.msgpack.encode("abc"), type=msgspec.Raw)
    assert token_count(raw) is None


def test_checked_events_are_the_batches_events_without_their_tokens(monkeypatch):
    from harness.contract import wire

    lists = [[stored([n], n - 1 or None), removed([n])] for n in range(1, 40)]
    data = payloads(*lists, [], [stored([], None, tokens=[1, 2])])
    monkeypatch.setattr(wire, "GROUP_BYTES", 200)  # groups of a few payloads
    found = list(checked_events(data))
    assert len(found) == len(lists) + 2
    full = [batch.events for _, batch in decode_batches(data)]
    assert [
        [(e.block_hashes, getattr(e, "parent_block_hash", 0)) for e in events]
        for events in found
    ] == [
        [(e.block_hashes, getattr(e, "parent_block_hash", 0)) for e in events]
        for events in full
    ]


def test_a_bad_payload_inside_a_group_is_named_after_the_good_ones():
    good = payloads([stored([1], None)], [removed([1])])
    bad = msgspec.msgpack.encode({"not": "a batch"})
    seen = []
    with pytest.raises(UnreadableStream) as caught:
        seen.extend(checked_events(good + bad + good))
    assert caught.value.position == f"byte {len(good)}"
    assert len(seen) == 2
