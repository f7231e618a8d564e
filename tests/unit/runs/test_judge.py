"""An engine session's capture judged, on hand-built streams (no engine)."""

import msgspec
from support.events import cleared, payload, removed, stored

from harness.runs.engine import HASH_BLOCK_SIZE
from harness.runs.judge import judge
from harness.runs.session import Session

HBS = HASH_BLOCK_SIZE
EVICTION = [300] * HBS  # tokens of the eviction traffic, not of the shared prefix


def session(*payloads: bytes) -> Session:
    return Session("patched", list(payloads), 1.0, 0, [], [], "")


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
