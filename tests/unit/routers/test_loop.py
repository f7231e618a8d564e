"""The one loop every router is measured by (harness.routers.loop)."""

from collections import Counter

import pytest
from support.events import removed, stored
from support.probes import SETUP, START, H, op, probe

from harness.contract.records import ProbeRecord
from harness.contract.wire import decode_event
from harness.routers.loop import (
    bounded,
    content_tree_router,
    hash_set_router,
    measure,
    merged_ledger,
)

RECORDS = [
    START,
    SETUP,
    op(0, stored([H[2]], None, block_size=6), stored([H[4]], H[3])),
    ProbeRecord(0, [probe(12, hit=10)]),
    op(1, stored([H[3]], H[2]), removed([H[4]])),
    ProbeRecord(1, [probe(12, hit=6), probe(7, hit=6)]),
]


class Recording:
    """A router that answers a fixed number and writes down what it saw."""

    def __init__(self, answer):
        self.answer = answer
        self.calls = []

    def publish(self, events):
        self.calls.append(("publish", [type(decode_event(e)).__name__ for e in events]))

    def settle(self):
        self.calls.append(("settle",))

    def predict(self, token_ids, block_hashes):
        self.calls.append(("predict", len(token_ids), len(block_hashes)))
        return self.answer

    def ledger(self):
        return Counter({"seen": 1})


def test_each_operation_is_one_batch_and_every_probe_is_asked_once_settled():
    router = Recording(answer=100)
    run = measure(RECORDS, router)
    assert router.calls == [
        ("publish", ["BlockStored", "BlockStored"]),
        ("settle",),
        ("predict", 12, 6),
        ("publish", ["BlockStored", "BlockRemoved"]),
        ("settle",),
        ("predict", 12, 6),
        ("predict", 7, 3),
        ("settle",),
    ]
    assert (run.batches, run.events, len(run.answers)) == (2, 4, 3)
    assert run.ledger == Counter({"seen": 1})
    # 100 tokens answered: bounded by num_tokens - 1 at the alignment of 2.
    assert [a.raw for a in run.answers] == [100, 100, 100]
    assert [a.predicted for a in run.answers] == [10, 10, 6]
    assert [a.verdict for a in run.answers] == ["exact", "over", "exact"]
    tally = run.tally()
    assert (tally.probes, tally.exact, tally.over, tally.over_tokens) == (3, 2, 1, 4)


@pytest.mark.parametrize(
    ("raw", "num_tokens", "alignment", "found"),
    [
        (64, 64, 16, 48),
        (64, 65, 16, 64),
        (30, 100, 16, 30),
        (0, 1, 16, 0),
        (-1, 9, 2, 0),
    ],
)
def test_bounded_caps_below_the_prompt_at_the_alignment(
    raw, num_tokens, alignment, found
):
    assert bounded(raw, num_tokens, alignment) == found


def test_the_content_tree_router_is_vllms_rules_over_the_stream():
    # As test_fidelity's replay: under by 4 (the entry's store refused),
    # then over by 2 (an ancestry boundary live, the entry gone).
    run = measure(RECORDS, content_tree_router(RECORDS))
    assert [(a.truth, a.predicted) for a in run.answers] == [(10, 6), (6, 8), (6, 6)]
    assert run.ledger == Counter(
        {"stores indexed": 2, "stores refused: parent not indexed": 1}
    )
    assert merged_ledger([run, run])["stores indexed"] == 4


def test_the_hash_set_router_indexes_the_store_under_a_parent_it_lacks():
    # The entry the content tree refuses is announced, so it is held: exact
    # on the first probe; the same over-prediction after its removal.
    run = measure(RECORDS, hash_set_router(RECORDS))
    assert [(a.truth, a.predicted) for a in run.answers] == [(10, 10), (6, 8), (6, 6)]
    assert run.ledger == Counter(
        {"stores indexed": 3, "stores indexed under a parent not indexed": 1}
    )


def test_a_run_without_probes_is_refused():
    with pytest.raises(ValueError, match="without probes"):
        measure([START, op(0, stored([H[2]], None, block_size=6))], Recording(0))
