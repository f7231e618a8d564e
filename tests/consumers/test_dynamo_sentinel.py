"""Dynamo's relay settled on its sentinel learns the engine's group kinds
from the stream alone (harness.routers.dynamo_relay, `SENTINEL_GROUP`).

A model whose group 0 is Mamba and group 1 full attention stores one
32-token chain in both; then group 0 (Mamba) removes the chain's second
block. The relay drops that removal (group 0 is Mamba to it), so the index
still holds both blocks. A sentinel stored in group 0 as full attention
would teach the relay otherwise, and the removal would take the attention
block with it: 16 predicted instead of 32.
"""

import msgspec
from support.events import removed, stored

from harness.routers.dynamo_relay import DynamoRelay
from harness.routers.publisher import StreamPublisher

BLOCK = 16
TOKENS = list(range(2 * BLOCK))
_encoder = msgspec.msgpack.Encoder()


def test_a_mamba_group_0_removal_stays_out_of_the_index_after_a_settle():
    with StreamPublisher() as publisher:
        relay = DynamoRelay(publisher, BLOCK)
        try:
            chain = dict(block_size=BLOCK, tokens=TOKENS)
            relay.publish(
                [
                    _encoder.encode(
                        stored([1, 2], None, group=1, kind="full_attention", **chain)
                    ),
                    _encoder.encode(
                        stored([1, 2], None, group=0, kind="mamba", **chain)
                    ),
                ]
            )
            relay.settle()
            assert relay.predict(TOKENS, []) == 2 * BLOCK
            relay.publish([_encoder.encode(removed([2], group=0))])
            relay.settle()
            assert relay.predict(TOKENS, []) == 2 * BLOCK
            assert (
                relay.ledger()["relay filtered removed: non_main_attention_group"] == 1
            )
        finally:
            relay.close()
