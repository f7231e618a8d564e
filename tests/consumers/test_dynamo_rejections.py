"""What Dynamo's radix tree rejects from the seeded workloads, pristine
against patched (docs/consumers.md)."""

import pytest

from harness.contract.classes import C1_CLASSES, UNHELD_PARENT_KINDS
from harness.routers.replay import REMOVAL, STORE, STREAM
from harness.targets import TIERS


def labels_of(*classes: str) -> tuple[str, ...]:
    """Label prefixes of the partial-entry calls whose entry is in ``classes``."""
    return tuple(f"{label}@" for label, cls in C1_CLASSES.items() if cls in classes)


# First registrations of a partial entry past the first cache block (class K1),
# which the default tier reports the ancestry of.
FIRST_REGISTRATIONS = labels_of("K1")
# The partial-entry calls of every class, all of which the strict tier fixes.
PARTIAL_ENTRIES = labels_of("K1", "K2", "K3", "K4")


def test_default_tier_first_registrations_name_no_unreported_parent(comparisons):
    comparison = comparisons["default"]
    # The workloads reach the defect: without it this test proves nothing.
    assert comparison.pristine.rejected_by(STORE, FIRST_REGISTRATIONS, STREAM)
    assert comparison.patched.rejected_by(STORE, FIRST_REGISTRATIONS, STREAM) == 0


# A store whose call began with its parent (or, for a partial entry, its
# cache block start) held nowhere in the pool (class K6): a tier whose stream
# is the pool's holdings leaves it as released.
UNHELD_PARENT = tuple(f"{kind}@" for kind in sorted(UNHELD_PARENT_KINDS))


def added_rejections(replay, unheld: bool) -> int:
    """Stores the series added (or rewrote) that the tree refused for a reason
    the stream causes: of K6's calls (``unheld``), or of any other."""
    return sum(
        count
        for (kind, label, reason), count in replay.rejected_added.items()
        if kind == STORE
        and reason == STREAM
        and label.startswith(UNHELD_PARENT) == unheld
    )


def test_strict_tier_stores_name_no_unreported_parent(comparisons, target):
    """K1-K4: no store, of a partial entry or of full blocks (the skipped
    blocks of sliding window and Mamba), is refused for a reason the stream
    causes; a store whose parent or block start the pool had lost before its
    call (K6) is refused no more often than on the released stream where the
    tier leaves K6 (a call split into runs has one such store, not one for
    every run)."""
    comparison = comparisons["strict"]
    assert comparison.pristine.rejected_by(STORE, PARTIAL_ENTRIES, STREAM)
    assert comparison.pristine.rejected_by(STORE, "full", STREAM)
    unheld = comparison.patched.rejected_by(STORE, UNHELD_PARENT, STREAM)
    refused = unheld + added_rejections(comparison.patched, unheld=True)
    if "K6" in target.fixes["strict"]:
        assert refused == 0
    else:
        assert refused <= comparison.pristine.rejected_by(STORE, UNHELD_PARENT, STREAM)
    assert comparison.patched.rejected_by(STORE, "", STREAM) == unheld
    assert added_rejections(comparison.patched, unheld=False) == 0


@pytest.mark.parametrize("tier", TIERS)
def test_no_cause_has_more_rejections_the_stream_causes(comparisons, target, tier):
    comparison = comparisons[tier]
    worse = [
        (kind, cause, before, after)
        for kind, cause in comparison.causes()
        if (after := comparison.patched.rejected[kind, cause, STREAM])
        > (before := comparison.pristine.rejected[kind, cause, STREAM])
    ]
    assert worse == []
    # Every event the series adds is sound where it lands, but the rewritten
    # store of a K6 call where the tier leaves K6: it names the lost parent.
    assert added_rejections(comparison.patched, unheld=False) == 0
    if "K6" in target.fixes[tier]:
        assert added_rejections(comparison.patched, unheld=True) == 0


@pytest.mark.parametrize("tier", TIERS)
def test_no_cause_has_more_rejected_stores(comparisons, tier):
    """Among the events both trees emit; an event the series adds can still
    be rejected where the tree had lost its parent, which its entry's store
    then is in both trees (counted apart, in the summary)."""
    comparison = comparisons[tier]
    worse = [
        (cause, before, after)
        for kind, cause in comparison.causes()
        if kind == STORE
        and (after := comparison.patched.rejected_of(STORE, cause))
        > (before := comparison.pristine.rejected_of(STORE, cause))
    ]
    assert worse == []


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("kind", (STORE, REMOVAL))
def test_no_kind_has_more_rejected_events(comparisons, tier, kind):
    comparison = comparisons[tier]
    assert comparison.patched.rejected_by(kind) <= comparison.pristine.rejected_by(kind)


@pytest.mark.parametrize("tier", TIERS)
def test_the_tree_is_empty_once_everything_is_evicted(comparisons, tier):
    assert comparisons[tier].patched.left_after_drain == 0
