"""The model of llm-d's rules (harness.routers.llmd_model): one rule a test."""

from support.events import cleared, removed, stored

from harness.routers.llmd_model import LlmdModel, request_keys
from harness.routers.router import FULL_ATTENTION, EngineLayout, GroupLayout

LAYOUT = EngineLayout(2, 2, (GroupLayout(FULL_ATTENTION, 6),), medium="GPU")
TOKENS = list(range(12))


def model(*events, block_size=2):
    found = LlmdModel(LAYOUT, block_size)
    for event in events:
        found.apply(event)
    return found


def test_a_store_of_a_kind_other_than_attention_is_skipped():
    found = model(stored([1], None, kind="mamba"))
    assert found.ledger() == {"stores skipped: kind not attention": 1}
    assert found.predict(TOKENS, []) == 0


def test_a_store_that_is_not_dense_is_skipped():
    found = model(
        stored([1], None, tokens=[0, 1, 2]),  # tokens not whole blocks
        stored([1], None, tokens=[0, 1, 2, 3]),  # two blocks, one hash
    )
    assert found.ledger() == {"stores skipped: not dense": 2}


def test_a_store_whose_parent_maps_to_no_request_key_is_dropped():
    found = model(stored([9], 8, tokens=[2, 3]))
    assert found.ledger() == {"stores dropped: parent not mapped": 1}


def test_tokens_are_rehashed_from_the_parents_request_key():
    found = model(stored([1], None), stored([2, 3], 1, tokens=[2, 3, 4, 5]))
    assert found.predict(TOKENS, []) == 6
    assert found.predict([0, 1, 9, 9], []) == 2  # a longest prefix


def test_at_a_coarser_canonical_size_short_stores_yield_no_key():
    found = model(
        stored([1, 2], None),  # 4 tokens: no 6-token key
        stored([3], 2, tokens=[4, 5]),  # its parent maps to no key
        block_size=6,
    )
    assert found.ledger() == {
        "stores indexed with no key": 1,
        "stores dropped: parent not mapped": 1,
    }
    assert found.predict(TOKENS, []) == 0


def test_an_engine_key_maps_to_the_request_keys_inside_its_block():
    found = model(stored([1], None, block_size=6))
    assert found.engine["GPU", 1][0] == request_keys(0, TOKENS[:6], 2)
    assert found.predict(TOKENS, []) == 6
    found.apply(removed([1]))
    assert found.predict(TOKENS, []) == 0


def test_removal_is_refcounted():
    found = model(stored([1], None), stored([1], None), removed([1]))
    assert found.predict(TOKENS, []) == 2


def test_all_blocks_cleared_clears_everything():
    found = model(stored([1], None), cleared())
    assert (found.predict(TOKENS, []), found.engine) == (0, {})
