"""The Dynamo adapter's translation, where it needs no Dynamo
(tests/consumers covers the rest against the real RadixTree)."""

import pytest
from support.consumers import RecordingTree
from support.events import removed, stored

from harness.routers.dynamo import (
    DynamoAdapter,
    Unplaceable,
    dynamo_data,
    dynamo_hash,
)


def test_bytes_hash_keeps_the_low_64_bits_big_endian_and_ints_pass_through():
    digest = bytes(range(32))
    assert dynamo_hash(digest) == int.from_bytes(bytes(range(24, 32)), "big")
    assert dynamo_hash(12345) == 12345


def test_removal_translates_each_hash():
    event = removed([7, b"\x00" * 24 + b"\x00\x00\x00\x00\x00\x00\x01\x02"])
    assert dynamo_data(event) == {"removed": {"block_hashes": [7, 0x0102]}}


def test_store_whose_tokens_do_not_span_its_blocks_is_not_sent():
    with pytest.raises(Unplaceable, match="rule C3"):
        dynamo_data(stored([1, 2], None, tokens=[1, 2, 3]))
    tree = RecordingTree()
    [message] = DynamoAdapter(tree).apply(stored([1, 2], None, tokens=[1, 2, 3]))
    assert message.startswith("not sent")
    assert tree.payloads == []
