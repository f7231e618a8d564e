"""Router fidelity: a run's probes replayed against its events and the pool's
snapshots, and the tally of exact, over- and under-predictions."""

import pytest
from support.events import removed, stored
from support.probes import SETUP, START, H, op, probe

from harness.contract.records import (
    PoolSnapshot,
    ProbeRecord,
)
from harness.routers.fidelity import Tally, replay_probes, verdict
from harness.routers.router import Prediction


def test_tally_counts_exact_over_and_under_with_their_tokens():
    tally = Tally()
    for predicted, truth in [(6, 6), (0, 0), (16, 12), (6, 12), (0, 4)]:
        tally.add(predicted, truth)
    assert (tally.probes, tally.hits, tally.exact) == (5, 4, 2)
    assert (tally.over, tally.over_tokens) == (1, 4)
    assert (tally.under, tally.under_tokens) == (2, 10)
    assert tally.cells() == ["5", "4", "40.0", "1 (4)", "2 (5)"]
    other = Tally()
    other.add(2, 2)
    tally.merge(other)
    assert (tally.probes, tally.exact) == (6, 3)


@pytest.mark.parametrize(
    ("predicted", "truth", "found"), [(6, 6, "exact"), (8, 6, "over"), (2, 6, "under")]
)
def test_verdict(predicted, truth, found):
    assert verdict(predicted, truth) == found


def test_replay_predicts_from_the_stream_and_mirrors_the_pool():
    # The router holds the full block (H[2], 6 tokens) and an ancestry
    # boundary at 8 that the pool does not hold; the pool holds the entry at
    # 10, whose store the router refused (its parent, 8, came later).
    records = [
        START,
        SETUP,
        op(0, stored([H[2]], None, block_size=6), stored([H[4]], H[3])),
        PoolSnapshot(0, {0: [H[2], H[4]]}),
        ProbeRecord(0, [probe(12, hit=10)]),
        op(1, stored([H[3]], H[2]), removed([H[4]])),
        PoolSnapshot(1, {0: [H[2]]}),
        ProbeRecord(1, [probe(12, hit=6)]),
    ]
    replay = replay_probes(records)
    first, second = replay.outcomes
    assert first.truth == first.mirrored == Prediction(10, (10,))
    assert first.predicted == Prediction(6, (6,))  # under: the entry refused
    assert first.refused == (True,)
    assert first.unheld == (frozenset(),)
    # The ancestry boundary is live, the entry gone: over by 2 tokens.
    assert second.truth == second.mirrored == Prediction(6, (6,))
    assert second.predicted == Prediction(8, (8,))
    assert second.unheld == (frozenset({H[3]}),)
    assert replay.refused_stores == 1
    tally = replay.tally()
    assert (tally.exact, tally.over, tally.under) == (0, 1, 1)
    assert replay.tally(0) == tally


def test_replay_needs_a_run_recorded_with_probes():
    with pytest.raises(ValueError, match="recorded without probes"):
        replay_probes([START, op(0, stored([H[2]], None, block_size=6))])
