"""An upstream design's stream as the two consumers of
harness.routers.designs read it: one ignoring the `skipped_*` fields, one
reading them as the store's first block spanning back to the skipped
parent."""

import msgspec

from harness.contract.records import EventRecord, OpRecord
from harness.contract.wire import BlockRemoved, BlockStored
from harness.routers.designs import SkippedStore, read_skipped, reading


def encoded(event) -> bytes:
    return msgspec.msgpack.encode(event)


def decoded(record: EventRecord) -> BlockStored:
    return msgspec.msgpack.decode(record.data, type=BlockStored)


def test_a_store_with_skipped_context_is_read_as_its_first_block_spanning_it():
    store = SkippedStore(
        block_hashes=[3, 4],
        parent_block_hash=2,
        token_ids=list(range(8, 16)),
        block_size=4,
        lora_id=None,
        medium="GPU",
        lora_name=None,
        skipped_parent_block_hash=1,
        skipped_token_ids=list(range(4, 8)),
    )
    first, rest = read_skipped(EventRecord("op", encoded(store)))
    first, rest = decoded(first), decoded(rest)
    assert (first.block_hashes, first.parent_block_hash) == ([3], 1)
    assert first.token_ids == list(range(4, 12)) and first.block_size == 8
    assert (rest.block_hashes, rest.parent_block_hash) == ([4], 3)
    assert rest.token_ids == list(range(12, 16)) and rest.block_size == 4


def test_events_without_skipped_context_are_read_as_they_are():
    plain = EventRecord(
        "op",
        encoded(
            BlockStored(
                block_hashes=[1],
                parent_block_hash=None,
                token_ids=[0, 1],
                block_size=2,
                lora_id=None,
                medium="GPU",
                lora_name=None,
            )
        ),
    )
    removed = EventRecord("op", encoded(BlockRemoved(block_hashes=[1], medium="GPU")))
    assert read_skipped(plain) == [plain]
    assert read_skipped(removed) == [removed]
    records = [OpRecord(0, "op", [plain, removed])]
    assert reading(records)[0].events == [plain, removed]
