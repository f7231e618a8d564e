"""KV-event report mode "full", pristine tree beside patched tree.

A request that asks for it (``extra_args={"kv_cache_report_mode": "full"}``)
has its prefix-cache hit announced again: one `BlockStored` per KV cache
group, from the root, of the hashes of every block the hit reuses
(`emit_cached_block_events`, labelled ``hits``). docs/contract.md ("Report
mode full") says what that does to a consumer; what is asserted here is
what holds by design, each test saying why. Each config of
FULL_REPORT_CONFIGS repeats its twin of CONFIGS with the same seed and
operations, so the two streams can be compared event by event.
"""

import pytest

from harness.contract.classes import CLASSES, RULES
from harness.contract.wire import BlockStored, decode_event
from harness.workloads.drivers import FULL_REPORT_TWINS

TREES = ("pristine", "patched")


def runs_of(conformance, config: str) -> dict:
    return conformance.pair(config, *conformance.long_workload, counted=False)


def is_reannouncement(event) -> bool:
    return event.label.startswith("hits@")


def events_where(run, keep) -> list[list]:
    """Each operation's events for which ``keep`` holds."""
    return [[event for event in op.events if keep(event)] for op in run.ops]


def reannounced(run) -> set:
    """Every hash a re-announcement stored."""
    return {
        block_hash
        for op in events_where(run, is_reannouncement)
        for event in op
        for block_hash in decode_event(event.data).block_hashes
    }


@pytest.mark.parametrize("config", list(FULL_REPORT_TWINS))
def test_full_mode_only_adds_reannouncements(conformance, config):
    """Announcing a hit changes nothing in the pool: with every request in
    report mode "full", each tree emits its incremental stream event for
    event, plus the re-announcements, which are stores and the same in both
    trees (no patch touches them)."""
    full = runs_of(conformance, config)
    incremental = runs_of(conformance, FULL_REPORT_TWINS[config])
    for tree in TREES:
        assert events_where(full[tree], lambda e: not is_reannouncement(e)) == [
            op.events for op in incremental[tree].ops
        ], tree
    announced = events_where(full["pristine"], is_reannouncement)
    assert announced == events_where(full["patched"], is_reannouncement)
    for event in (event for op in announced for event in op):
        assert isinstance(decode_event(event.data), BlockStored)


@pytest.mark.parametrize("config", list(FULL_REPORT_TWINS))
def test_full_mode_is_never_worse_than_pristine(conformance, tier_fixes, config):
    """Every class and rule counts no more on the patched stream than on the
    pristine one, and the classes the tier fixes are gone, in report mode
    "full" too."""
    runs = runs_of(conformance, config)
    pristine, patched = runs["pristine"], runs["patched"]
    for cls in CLASSES:
        limit = 0 if cls in tier_fixes else pristine.classes[cls]
        assert patched.classes[cls] <= limit, (cls, pristine.classes[cls])
    for rule in RULES:
        assert patched.rules[rule] <= pristine.rules[rule], rule


@pytest.mark.parametrize("config", list(FULL_REPORT_TWINS))
def test_full_mode_findings_are_reannounced_hashes(conformance, config):
    """The re-announcements are what report mode "full" breaks: every
    finding outside K1-K7 (a hash live in a view that the pool does not
    hold, C6) names a hash a re-announcement stored. A consumer that counts
    copies (K5) counts a re-announced hash once more than the pool holds it,
    and the stream does not tell a re-announcement from a copy; nor does any
    tier."""
    for tree, run in runs_of(conformance, config).items():
        hashes = reannounced(run)
        # A release before report mode (0.24, 0.25) announces nothing again.
        assert bool(hashes) == (run.start.report_mode == "full"), tree
        unexplained = [
            str(violation)
            for _, violation in run.unclassified()
            if not set(violation.hashes) <= hashes
        ]
        assert unexplained == [], f"{tree}: {unexplained[:3]}"


@pytest.mark.parametrize("config", list(FULL_REPORT_TWINS))
def test_full_mode_router_is_never_less_exact(conformance, config):
    """Per group, the patched router is exact on at least as many probes as
    the pristine one and mispredicts no more tokens, in report mode "full"
    too."""
    runs_of(conformance, config)
    replays = conformance.probe_replays[(config, *conformance.long_workload)]
    for group in [None, *range(len(replays["patched"].layout.groups))]:
        before, after = (replays[tree].tally(group) for tree in TREES)
        assert after.exact >= before.exact, group
        assert after.mispredicted_tokens <= before.mispredicted_tokens, group
