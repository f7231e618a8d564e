"""A workload's violations sorted into classes, and C7 between two runs,
on hand-built records (no vLLM)."""

import pytest
from support.events import labelled, removed, stored

from harness.contract.checker import sha256_hash_model
from harness.contract.classes import CLASSES, RULES, align, replay, wire_differences
from harness.contract.records import OpRecord, PoolSnapshot, RunEnd, RunStart

HBS = 2
NONE_HASH = b"\x07" * 32
MODEL = sha256_hash_model(HBS, NONE_HASH, int_block_hashes=True)
FULL = "full@full_attention"


def start(ops: int = 1) -> RunStart:
    return RunStart(
        config="hand-built",
        seed=0,
        ops=ops,
        hash_block_size=HBS,
        num_blocks=8,
        block_sizes=[4],
        group_kinds=["full_attention"],
        medium="GPU",
        none_hash=NONE_HASH,
        int_block_hashes=True,
        tree="nowhere",
    )


def chain(tokens: list[int]) -> dict[int, int]:
    """The hash at each hash-block boundary of ``tokens``, by its end."""
    value, hashes = None, {}
    for end in range(HBS, len(tokens) + 1, HBS):
        value = MODEL.chunk_hash(value, tuple(tokens[end - HBS : end]), None)
        hashes[end] = MODEL.external(value)
    return hashes


TOKENS = list(range(8))
H = chain(TOKENS)
G = chain([9, 9, 9, 9])


def full_block():
    return stored([H[4]], None, block_size=4, tokens=TOKENS[:4])


def run_of(*ops) -> list:
    """Records of a run whose operations emitted ``ops`` (lists of
    (label, event)), not drained at the end."""
    records = [start(len(ops))]
    records += [
        OpRecord(index, "op", [labelled(label, event) for label, event in events])
        for index, events in enumerate(ops)
    ]
    return [*records, RunEnd(drained=False)]


def test_the_classes_and_rules_are_the_registrys():
    assert CLASSES == ("K1", "K2", "K3", "K4", "K5", "K6", "K7")
    assert RULES == ("C1", "C2", "C3", "C4", "C5", "C6")


@pytest.mark.parametrize(
    ("label", "event", "expected"),
    [
        ("partial:first@full_attention", stored([H[8]], H[6], tokens=TOKENS[6:]), "K1"),
        ("partial:replace@mamba", stored([H[8]], H[6], tokens=TOKENS[6:]), "K1"),
        ("partial:first-shared@mamba", stored([H[8]], H[6], tokens=TOKENS[6:]), "K7"),
        ("partial:first-block@full_attention", stored([G[4]], G[2]), "K2"),
        ("partial:promotion@full_attention", stored([H[8]], H[6]), "K3"),
        ("partial:promotion-first-block@mamba", stored([G[4]], G[2]), "K3"),
        # The pool held the entry's block start nowhere when the call began.
        ("partial:first-unheld-start@mamba", stored([H[8]], H[6]), "K6"),
        ("partial:first-unheld-start@full_attention", stored([H[8]], H[6]), "K6"),
        ("partial:replace-block-end@mamba", stored([H[8]], H[6]), "K4"),
        ("full@sliding_window", stored([5], 3, block_size=4), "K4"),
        ("full@mamba", stored([5, 6], None, tokens=[1, 2, 3]), "K4"),
        ("full@full_attention", stored([5], 3, block_size=4), "C1:full@full_attention"),
        ("full-unheld-parent@full_attention", stored([5], 3, block_size=4), "K6"),
        ("full-unheld-parent@mamba", stored([5], 3, block_size=4), "K6"),
        ("evict:allocate", removed([42]), "C2:evict:allocate"),
    ],
)
def test_a_violation_is_classed_by_the_operation_that_emitted_it(
    label, event, expected
):
    run = replay(run_of([(FULL, full_block())], [(label, event)]))
    assert [name for name, _ in run.findings] == [expected]
    if expected in CLASSES:
        assert run.classes[expected] == 1
        assert run.unclassified() == []
    else:
        assert run.unclassified() == run.findings


def test_k5_counts_stores_of_a_live_hash():
    run = replay(run_of([(FULL, full_block())], [(FULL, full_block())]))
    assert run.findings == []
    assert run.classes["K5"] == 1


def test_c4_is_never_a_class_but_names_the_operation():
    run = replay(run_of([(FULL, stored([H[4]], None, block_size=4, tokens=[0] * 4))]))
    assert [(name, v.rule) for name, v in run.findings] == [(f"C4:{FULL}", "C4")]
    assert run.unclassified() == run.findings


ANCESTRY = ("partial:first@full_attention", stored([H[6]], H[4], tokens=TOKENS[4:6]))
ENTRY = ("partial:first@full_attention", stored([H[8]], H[6], tokens=TOKENS[6:]))


def ancestry_pair():
    """A run whose entry names a boundary no event reported, and the same run
    with that boundary stored before the entry and removed after it."""
    pristine = replay(
        run_of([(FULL, full_block()), ENTRY], [("evict", removed([H[8]]))])
    )
    patched = replay(
        run_of(
            [(FULL, full_block()), ANCESTRY, ENTRY],
            [("evict", removed([H[8]])), ("evict", removed([H[6]]))],
        )
    )
    return pristine, patched


def test_c7_accepts_ancestry_stores_and_their_removals_of_a_fixed_class():
    pristine, patched = ancestry_pair()
    assert pristine.classes["K1"] == 1 and patched.classes["K1"] == 0
    assert wire_differences(pristine, patched) == []


def test_c7_refuses_an_added_store_from_a_full_block_call():
    pristine = replay(run_of([(FULL, full_block()), ENTRY]))
    patched = replay(run_of([(FULL, full_block()), (FULL, ANCESTRY[1]), ENTRY]))
    assert wire_differences(pristine, patched) == [
        f"op 0 ({FULL}): added store is neither a partial entry's ancestry nor a "
        "boundary stored again"
    ]


def test_c7_accepts_an_ancestry_run_of_several_boundaries():
    h = chain(list(range(12)))
    entry = ("partial:first@full_attention", stored([h[10]], h[8], tokens=[8, 9]))
    run = stored([h[6], h[8]], h[4], tokens=[4, 5, 6, 7])
    run = ("partial:first@full_attention", run)
    pristine = replay(run_of([(FULL, full_block()), entry]))
    patched = replay(run_of([(FULL, full_block()), run, entry]))
    assert patched.findings == []
    assert wire_differences(pristine, patched) == []


def test_c7_refuses_an_added_store_that_is_not_at_hash_block_size():
    pristine = replay(run_of([(FULL, full_block()), ENTRY]))
    wide = ("partial:first@full_attention", stored([H[6]], H[4], block_size=4))
    patched = replay(run_of([(FULL, full_block()), wide, ENTRY]))
    assert wire_differences(pristine, patched) == [
        "op 0 (partial:first@full_attention): added store is not an ancestry store"
    ]


POOL_ENTRY = ("partial:first@full_attention", stored([H[6]], H[4], tokens=TOKENS[4:6]))
EVICT = "evict:connector"


def test_c7_accepts_a_boundary_stored_again_when_the_pool_lets_it_go():
    """The pool held H6 as an entry, so no chain stored it; when that entry
    leaves while the chain to H8 leads through it, it is stored again right
    after the pool's removal, and removed with the chain."""
    pristine = replay(
        run_of(
            [(FULL, full_block()), POOL_ENTRY],
            [ENTRY],
            [(EVICT, removed([H[6]]))],
            [(EVICT, removed([H[8]]))],
        )
    )
    patched = replay(
        run_of(
            [(FULL, full_block()), POOL_ENTRY],
            [ENTRY],
            [(EVICT, removed([H[6]])), (EVICT, POOL_ENTRY[1])],
            [(EVICT, removed([H[8]])), (EVICT, removed([H[6]]))],
        )
    )
    assert pristine.classes["C1"] == 0 and patched.findings == []
    assert wire_differences(pristine, patched) == []


def test_c7_refuses_a_store_again_of_a_hash_the_pool_did_not_let_go():
    pristine = replay(run_of([(FULL, full_block())], [(EVICT, removed([H[4]]))]))
    patched = replay(
        run_of(
            [(FULL, full_block())],
            [(EVICT, removed([H[4]])), (EVICT, POOL_ENTRY[1])],
        )
    )
    assert wire_differences(pristine, patched) == [
        "op 1 (evict:connector): added store is neither a partial entry's "
        "ancestry nor a boundary stored again"
    ]


def test_c7_refuses_a_pristine_event_that_went_missing():
    pristine = replay(run_of([(FULL, full_block()), ENTRY]))
    patched = replay(run_of([(FULL, full_block())]))
    assert wire_differences(pristine, patched) == [
        "op 0: pristine events missing or reordered"
    ]


# A Mamba (align mode) call that cached the second block only: pristine's
# store names no hash for the first block's tokens (C3, class K4).
SKIPPED_FIRST = ("full@mamba", stored([H[8]], None, block_size=4, tokens=TOKENS))
SPANNED = ("full@mamba", stored([H[8]], None, block_size=8, tokens=TOKENS))


def test_c7_lets_a_tier_that_fixes_k4_rewrite_a_k4_store():
    pristine = replay(run_of([SKIPPED_FIRST]))
    patched = replay(run_of([SPANNED]))
    assert pristine.classes["K4"] == 1 and patched.findings == []
    assert wire_differences(pristine, patched, rewrites=frozenset({"K4"})) == []
    assert wire_differences(pristine, patched) == [
        "op 0: pristine events missing or reordered"
    ]


def test_c7_lets_no_tier_rewrite_a_store_outside_k4():
    pristine = replay(run_of([(FULL, full_block()), ENTRY]))
    spanned_entry = stored([H[8]], H[4], block_size=4, tokens=TOKENS[4:])
    patched = replay(run_of([(FULL, full_block()), (ENTRY[0], spanned_entry)]))
    assert wire_differences(pristine, patched, rewrites=frozenset({"K4"})) == [
        "op 0: pristine events missing or reordered"
    ]


def test_c7_refuses_a_rewrite_that_drops_a_hash():
    pristine = replay(run_of([SKIPPED_FIRST]))
    patched = replay(run_of([]))
    assert wire_differences(pristine, patched, rewrites=frozenset({"K4"})) == [
        "op 0: a rewritten pristine store's hash is not stored"
    ]


def test_c7_lets_a_tier_that_fixes_k4_span_a_chain_back():
    """The chain of an entry in a block whose start the pool does not hold
    starts at the block's first boundary, spanning the tokens from the
    nearest block start the pool holds (here the root)."""
    label = "partial:first-unheld-start@mamba"
    span = (label, stored([H[6]], None, block_size=6, tokens=TOKENS[:6]))
    entry = (label, ENTRY[1])
    pristine = replay(run_of([entry]))
    patched = replay(run_of([span, entry]))
    assert pristine.classes["K6"] == 1 and patched.findings == []
    assert wire_differences(pristine, patched, rewrites=frozenset({"K4"})) == []
    assert wire_differences(pristine, patched) == [
        f"op 0 ({label}): added store is not an ancestry store"
    ]


def test_c7_never_lets_a_tier_drop_a_pristine_removal():
    """A removal is never class K4, even from a call whose stores can name
    a parent the pool does not hold."""
    label = "partial:replace-unheld-start@full_attention"
    again = (label, full_block())
    pristine = replay(run_of([(FULL, full_block())], [(label, removed([H[4]])), again]))
    patched = replay(run_of([(FULL, full_block())], [again]))
    assert wire_differences(pristine, patched, rewrites=frozenset({"K4"})) == [
        "op 1: pristine events missing or reordered"
    ]


def test_align_matches_in_order_and_skips_only_optional_events():
    pristine = [("s", b"a"), ("s", b"b"), ("r", b"c")]
    patched = [("s", b"x"), ("s", b"a"), ("r", b"c")]
    assert align(pristine, patched, {1}, key=tuple) == [1, None, 2]
    assert align(pristine, patched, key=tuple) is None  # b"b" is missing
    # Reordered: b"c" before b"a" cannot match both in order.
    assert align(pristine, [patched[2], patched[1]], {1}, key=tuple) is None
    # The key decides what "the same" is: here the bytes alone.
    relabelled = [("other", b"a"), ("s", b"b"), ("r", b"c")]
    assert align(pristine, relabelled, key=tuple) is None
    assert align(pristine, relabelled, key=lambda event: event[1]) == [0, 1, 2]


# The entry stored from its cache block's start (H4, which the pool holds):
# the stream of a tier whose stream is the pool's holdings.
HELD_ENTRY = (ENTRY[0], stored([H[8]], H[4], block_size=4, tokens=TOKENS[4:]))


def test_c7_lets_a_holdings_tier_rewrite_a_partial_entry_store():
    pristine = replay(run_of([(FULL, full_block()), ENTRY]))
    patched = replay(run_of([(FULL, full_block()), HELD_ENTRY]))
    assert pristine.classes["K1"] == 1 and patched.findings == []
    assert wire_differences(pristine, patched, holdings=True) == []
    assert wire_differences(pristine, patched) == [
        "op 0: pristine events missing or reordered"
    ]


def test_c7_lets_a_holdings_tier_add_no_ancestry():
    pristine, patched = ancestry_pair()
    assert wire_differences(pristine, patched) == []
    assert wire_differences(pristine, patched, holdings=True) == [
        f"op 0 ({ANCESTRY[0]}): added BlockStored is no rewritten pristine store",
        "op 1 (evict): added BlockRemoved is no rewritten pristine store",
    ]


def test_unheld_live_lists_what_the_stream_holds_and_the_pool_does_not():
    records = run_of([(FULL, full_block()), ANCESTRY, ENTRY])
    snapshot = PoolSnapshot(op=0, held={0: [H[4], H[8]]})
    run = replay([*records[:-1], snapshot, records[-1]])
    assert run.unheld_live == [frozenset({(("GPU", 0), H[6])})]
