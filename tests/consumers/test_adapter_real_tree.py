"""The Dynamo adapter on hand-built events, against Dynamo's real RadixTree."""

from dynamo._core import RadixTree
from support.consumers import RecordingTree
from support.events import cleared, labelled, removed, stored

from harness.contract.records import OpRecord, RunEnd
from harness.routers.dynamo import (
    DynamoAdapter,
    dynamo_data,
    dynamo_hash,
    tokens_hash,
)
from harness.routers.replay import (
    REMOVAL,
    STORE,
    STREAM,
    TREE,
    added_events,
    replay_into_dynamo,
)


def test_store_gives_each_hash_a_block_with_its_own_tokens_hash():
    event = stored([b"\x01" * 32, b"\x02" * 32], b"\x03" * 32, tokens=[5, 6, 7, 8])
    assert dynamo_data(event) == {
        "stored": {
            "parent_hash": dynamo_hash(b"\x03" * 32),
            "blocks": [
                {
                    "block_hash": dynamo_hash(b"\x01" * 32),
                    "tokens_hash": tokens_hash([5, 6]),
                },
                {
                    "block_hash": dynamo_hash(b"\x02" * 32),
                    "tokens_hash": tokens_hash([7, 8]),
                },
            ],
        }
    }


def test_tokens_hash_is_deterministic_and_depends_on_the_tokens():
    assert tokens_hash([5, 6]) == tokens_hash([5, 6])
    assert tokens_hash([5, 6]) != tokens_hash([6, 5])
    assert 0 <= tokens_hash(list(range(128))) < 1 << 64


def test_removal_and_root_store_translate():
    assert dynamo_data(removed([7, 8])) == {"removed": {"block_hashes": [7, 8]}}
    assert dynamo_data(stored([1], None))["stored"]["parent_hash"] is None


def test_event_ids_increase_by_one_per_applied_event():
    tree = RecordingTree()
    adapter = DynamoAdapter(tree)
    adapter.apply(stored([1], None))
    adapter.apply(stored([1], None, group=1))
    adapter.apply(cleared())
    assert [payload["event_id"] for _, payload in tree.payloads] == [0, 1, 2, 3]
    assert [worker for worker, _ in tree.payloads] == [0, 1, 0, 1]
    assert [payload["data"] for _, payload in tree.payloads][2:] == ["cleared"] * 2


def test_tree_takes_a_chain_and_rejects_an_unknown_parent_or_hash():
    adapter = DynamoAdapter(RadixTree())
    assert adapter.apply(stored([1, 2], None)) == []
    assert adapter.apply(stored([3], 2)) == []
    [store_rejection] = adapter.apply(stored([9], 8))
    assert "Failed to find parent block" in store_rejection
    assert adapter.apply(removed([3])) == []
    [removal_rejection] = adapter.apply(removed([3]))
    assert "Failed to find block" in removal_rejection


def test_each_view_is_its_own_worker():
    adapter = DynamoAdapter(RadixTree())
    adapter.apply(stored([1], None, group=0))
    adapter.apply(stored([1], None, group=1))
    assert adapter.apply(removed([1], group=0)) == []
    assert adapter.apply(removed([1], group=1)) == []


def test_cleared_reaches_every_view():
    adapter = DynamoAdapter(RadixTree())
    adapter.apply(stored([1], None, group=0))
    adapter.apply(stored([1], None, group=1))
    assert adapter.apply(cleared()) == []
    assert len(adapter.apply(removed([1], group=0))) == 1
    assert len(adapter.apply(removed([1], group=1))) == 1


def test_replay_counts_applied_and_rejected_events_by_kind_label_and_why():
    records = [
        OpRecord(0, "admit", [labelled("full@full_attention", stored([1], None))]),
        OpRecord(
            1,
            "admit",
            [
                labelled("partial:first@full_attention", stored([3], 2)),
                labelled("partial:first@full_attention", stored([4], 1)),
            ],
        ),
        OpRecord(2, "evict", [labelled("evict:allocate", removed([3]))]),
    ]
    count = replay_into_dynamo(records)
    assert count.applied == {
        (STORE, "full@full_attention"): 1,
        (STORE, "partial:first@full_attention"): 2,
        (REMOVAL, "evict:allocate"): 1,
    }
    # The stream never reported 2, so the store of 3 is the stream's fault;
    # it did report 3, so the tree's refusal to remove it is the tree's.
    assert count.rejected == {
        (STORE, "partial:first@full_attention", STREAM): 1,
        (REMOVAL, "evict:allocate", TREE): 1,
    }
    assert count.rejected_by(STORE, "partial:") == 1
    assert count.rejected_by(STORE, why=TREE) == 0
    assert count.rejected_by(REMOVAL) == 1


def test_a_copy_the_tree_did_not_count_is_the_trees_fault():
    records = [
        OpRecord(
            0,
            "admit",
            [
                labelled("full@full_attention", stored([1], None)),
                labelled("hits@full_attention", stored([1], None)),
                labelled("evict:allocate", removed([1])),
                labelled("partial:first@full_attention", stored([2], 1)),
            ],
        )
    ]
    count = replay_into_dynamo(records)
    assert count.rejected == {(STORE, "partial:first@full_attention", TREE): 1}


def test_rejections_of_added_events_are_counted_apart():
    pristine = [OpRecord(0, "admit", [labelled("partial:first@mamba", stored([2], 1))])]
    patched = [
        OpRecord(
            0,
            "admit",
            [
                labelled("partial:first@mamba", stored([1], 0)),
                labelled("partial:first@mamba", stored([2], 1)),
            ],
        )
    ]
    added = added_events(pristine, patched)
    assert added == {(0, 0)}
    count = replay_into_dynamo(patched, added)
    assert count.rejected_added == {(STORE, "partial:first@mamba", STREAM): 1}
    assert count.rejected == {(STORE, "partial:first@mamba", TREE): 1}


def test_a_store_the_adapter_cannot_send_is_the_streams_fault():
    unplaceable = stored([1, 2], None, tokens=[1, 2, 3])
    records = [OpRecord(0, "admit", [labelled("full@sliding_window", unplaceable)])]
    count = replay_into_dynamo(records)
    assert count.rejected == {(STORE, "full@sliding_window", STREAM): 1}


def test_removing_a_node_drops_its_subtree_from_the_tree():
    records = [
        OpRecord(0, "admit", [labelled("full@full_attention", stored([1, 2], None))]),
        OpRecord(1, "evict", [labelled("evict:allocate", removed([1]))]),
        OpRecord(2, "evict", [labelled("evict:allocate", removed([2]))]),
    ]
    count = replay_into_dynamo(records)
    assert count.rejected == {(REMOVAL, "evict:allocate", TREE): 1}


def test_blocks_left_in_the_tree_are_counted_when_the_run_drained():
    store = OpRecord(
        0, "admit", [labelled("full@full_attention", stored([1, 2], None))]
    )
    assert replay_into_dynamo([store, RunEnd(drained=True)]).left_after_drain == 2
    assert replay_into_dynamo([store, RunEnd(drained=False)]).left_after_drain == 0
