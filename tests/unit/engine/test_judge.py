"""An engine session's capture judged, on hand-built streams (no engine)."""

import msgspec
import pytest
from support.events import cleared, payload, removed, stored

from harness.contract.records import ServedRequest
from harness.engine.engine import BLOCK_SIZE, HASH_BLOCK_SIZE
from harness.engine.judge import judge
from harness.engine.session import Session

HBS = HASH_BLOCK_SIZE
EVICTION = [300] * HBS  # tokens of the eviction traffic, not of the shared prefix


def session(*payloads: bytes, requests=()) -> Session:
    return Session("patched", list(payloads), 1.0, 0, [], [], "", list(requests))


def test_a_clean_session_has_nothing_to_report():
    report = judge(
        session(
            payload(stored([1], None, block_size=4 * HBS), stored([2], 1, HBS)),
            payload(removed([2]), removed([1])),
            payload(cleared()),
        )
    )
    assert (report.batches, report.events, report.clears) == (3, 5, 1)
    assert report.hash_block_stores == 1
    assert report.violations == []
    assert (report.shared_live_at_reset, report.shared_live_at_end) == (0, 0)


def test_c1_on_a_hash_block_store_is_sorted_by_what_the_stream_showed_of_the_parent():
    report = judge(
        session(
            payload(stored([1], None, block_size=4 * HBS)),
            payload(stored([3], 2, block_size=HBS)),  # 2 was never reported
            payload(stored([2], 1, block_size=HBS), removed([2])),
            payload(stored([4], 2, block_size=HBS)),  # 2 was reported, then removed
        )
    )
    assert [v.hashes for v in report.unreported_parent] == [(2, 3)]
    assert [v.hashes for v in report.removed_parent] == [(2, 4)]
    assert report.rules() == {"C1": 2}


def test_c1_on_a_full_block_store_is_counted_but_not_sorted():
    report = judge(session(payload(stored([5], 9, block_size=4 * HBS))))
    assert report.rules() == {"C1": 1}
    assert report.unreported_parent == report.removed_parent == []


def test_shared_prefix_hashes_left_live_at_the_reset_and_at_the_end_are_counted():
    report = judge(
        session(
            payload(stored([1], None, block_size=HBS)),  # shared-prefix tokens
            payload(stored([7], None, block_size=HBS, tokens=EVICTION)),
            payload(cleared()),
            payload(stored([1], None, block_size=HBS)),
        )
    )
    assert report.shared_live_at_reset == 1
    assert report.shared_live_at_end == 1
    assert report.duplicate_stores == 0


def test_violations_are_counted_by_the_group_of_the_event_at_fault():
    mamba = msgspec.structs.replace(
        stored([5], 9, block_size=4 * HBS, group=1), kv_cache_spec_kind="mamba"
    )
    no_hash = msgspec.structs.replace(
        stored([], None, block_size=4 * HBS, group=1, tokens=[0] * 4 * HBS),
        kv_cache_spec_kind="mamba",
    )
    report = judge(
        session(payload(stored([1], None, block_size=4 * HBS)), payload(mamba, no_hash))
    )
    assert report.by_group == {
        "group 0 (unnamed kind)": {},
        "group 1 (mamba)": {"C1": 1, "C3": 1},
    }


# The e2e model's groups: Mamba (0) and attention (1), blocks of BLOCK_SIZE.
MAMBA, ATTENTION = {"group": 0, "kind": "mamba"}, {"group": 1, "kind": "full_attention"}
# A request of 200 tokens: its hashes at 32, 64, ..., 192 are 1..6.
REQUEST = list(range(200))
HASHES = [1, 2, 3, 4, 5, 6]


def served(sent, cached):
    return ServedRequest("shared", REQUEST, HASHES, sent, cached)


def first_blocks():
    """A payload storing the request's first cache block in both groups."""
    block = {"block_size": BLOCK_SIZE}
    return payload(
        stored([4], None, **block, **ATTENTION),
        stored([4], None, **block, **MAMBA),
    )


def test_each_request_is_predicted_from_the_batches_published_before_it():
    report = judge(
        session(
            first_blocks(),
            # The partial entry at 160, in both groups, after the first request.
            payload(
                stored([5], 4, block_size=HBS, **ATTENTION),
                stored([5], 4, block_size=HBS, **MAMBA),
                ts=3.0,
            ),
            requests=[served(sent=2.0, cached=128), served(sent=4.0, cached=192)],
        )
    )
    # First: the full block only; second: the entry at 160, and the engine
    # served more (its own hit at 192, which the stream never showed).
    assert report.predictions == [("shared", 128, 128), ("shared", 160, 192)]
    tally = report.fidelity
    assert (tally.probes, tally.exact, tally.under, tally.under_tokens) == (2, 1, 1, 32)
    assert "router fidelity" in report.render()


def test_a_hybrid_hit_needs_every_group():
    report = judge(
        session(
            payload(
                stored([4], None, block_size=BLOCK_SIZE, **ATTENTION),
                stored([5], 4, block_size=HBS, **ATTENTION),
                stored([4], None, block_size=BLOCK_SIZE, **MAMBA),
            ),
            requests=[served(sent=2.0, cached=128)],
        )
    )
    # Attention serves 160, the Mamba state is cached at 128 only.
    assert report.predictions == [("shared", 128, 128)]


def test_the_hash_set_indexes_a_store_the_content_tree_refuses():
    report = judge(
        session(
            first_blocks(),
            payload(
                stored([5, 6], 4, block_size=HBS, **ATTENTION),
                # The Mamba entry at 192 names a parent (160) no event
                # reported: the content tree refuses it.
                stored([6], 5, block_size=HBS, **MAMBA),
            ),
            requests=[served(sent=2.0, cached=192)],
        )
    )
    assert report.predictions == [("shared", 128, 192)]
    assert report.hash_set_predictions == [("shared", 192, 192)]
    tally = report.hash_set_fidelity
    assert (tally.probes, tally.exact, tally.under) == (1, 1, 0)


def reset(sent):
    return ServedRequest("reset", [], [], sent, 0)


@pytest.mark.parametrize(("cleared_at", "late"), [(2.5, 0), (3.5, 1)])
def test_a_reset_is_late_when_its_clear_follows_the_next_request(cleared_at, late):
    """The clear must reach the stream between the reset and the request
    sent after it; until it does, the router still holds the old blocks."""
    report = judge(
        session(
            first_blocks(),
            payload(cleared(), ts=cleared_at),
            requests=[reset(sent=2.0), served(sent=3.0, cached=0)],
        )
    )
    assert (report.resets, report.late_resets) == (1, late)
    assert report.after_reset == [0]
    assert report.predictions == [("shared", 128 if late else 0, 0)]


def test_an_unreported_parent_inside_the_first_block_is_counted_apart():
    # HASHES[2] ends at 96 tokens, inside the first cache block; HASHES[5]
    # at 192, past it. Both stores name a parent no event reported.
    report = judge(
        session(
            payload(
                stored([HASHES[3]], None, block_size=BLOCK_SIZE, **MAMBA),
                stored([HASHES[2]], 9, block_size=HBS, **ATTENTION),
                stored([HASHES[5]], 8, block_size=HBS, **ATTENTION),
            ),
            requests=[served(sent=2.0, cached=0)],
        )
    )
    assert [v.hashes[-1] for v in report.unreported_parent] == [HASHES[5]]
    assert report.first_block_unreported == {"group 1 (full_attention)": 1}
