"""Router fidelity, pristine tree beside patched tree.

Each long workload (conftest.LONG_WORKLOAD) looks probe requests up in the
engine's own cache at every quiet point (harness.workloads.probes), and a router
that indexes the stream predicts each hit from the events alone
(harness.routers.router, harness.routers.fidelity). How often it is exact,
over or under is printed at the end of the session and measured in
docs/consumers.md ("Router fidelity"); what is asserted here is what holds by
design, each test saying why:

- the router's rules are vLLM's lookup (applied to the pool's snapshot, they
  give the engine's hit), and the series changes no hit;
- the pristine router never over-predicts, and the patched router
  over-predicts only through ancestry boundaries the series added;
- a group whose index refused no store never under-predicts, and in
  full-attention groups the patched router never predicts less than the
  pristine one;
- per config and group, the patched router is exact on at least as many
  probes as the pristine one and mispredicts no more tokens; where the
  tier's stream is the pool's holdings, it never over-predicts, and it is
  exact on every probe unless a group's index refused a store (class K6:
  a parent the pool had lost before the store's call).
"""

import pytest

from harness.contract.classes import matched_events
from harness.contract.wire import BlockStored, decode_event
from harness.routers.router import FULL_ATTENTION
from harness.workloads.drivers import CONFIGS

TREES = ("pristine", "patched")
# A short run of every config, again with probes, for the stream comparison.
SHORT = (0, 20)


def groups_of(probe_replay) -> range:
    return range(len(probe_replay.layout.groups))


def added_store_hashes(pristine, patched) -> set:
    """Hashes stored by events the patched stream adds to the pristine one
    (C7 aligns the two streams operation by operation)."""
    found = set()
    for before, after in zip(pristine.ops, patched.ops, strict=True):
        matched = matched_events(before.events, after.events)
        for index, record in enumerate(after.events):
            if index not in matched:
                event = decode_event(record.data)
                if isinstance(event, BlockStored):
                    found.update(event.block_hashes)
    return found


@pytest.mark.parametrize("config", list(CONFIGS))
def test_probes_change_no_event(conformance, config):
    """Probes only read the pool's hash map and draw from their own
    generator: a workload runs the same operations and emits the same events
    with them as without them."""
    without = conformance.pair(config, *SHORT, counted=False)
    with_probes = conformance.pair(config, *SHORT, probes=4, counted=False)
    for tree in TREES:
        assert with_probes[tree].ops == without[tree].ops, tree
        assert with_probes[tree].findings == without[tree].findings, tree


@pytest.mark.parametrize("config", list(CONFIGS))
def test_rules_reproduce_the_engine_lookup(conformance, config):
    """vLLM's lookup rules (harness.routers.router), applied to what the
    pool holds at the quiet point, give exactly the engine's hit: combined
    and per group, every probe, both trees. So the router's prediction
    differs from the engine's hit only where its index differs from the
    pool."""
    for tree, probe_replay in conformance.long_probes(config).items():
        assert probe_replay.outcomes, f"{tree}: no probe was looked up"
        wrong = [o for o in probe_replay.outcomes if o.mirrored != o.truth]
        assert wrong == [], f"{tree}: {len(wrong)} probes, first {wrong[:1]}"


@pytest.mark.parametrize("config", list(CONFIGS))
def test_series_leaves_every_hit_unchanged(conformance, config):
    """The series adds events and never changes what the pool caches or how
    it is looked up: every probe has the same hit in both trees."""
    replays = conformance.long_probes(config)
    pristine, patched = (replays[tree].outcomes for tree in TREES)
    assert [o.block_hashes for o in pristine] == [o.block_hashes for o in patched]
    assert [o.num_tokens for o in pristine] == [o.num_tokens for o in patched]
    assert [o.truth for o in pristine] == [o.truth for o in patched]


@pytest.mark.parametrize("config", list(CONFIGS))
def test_pristine_never_over_predicts(conformance, config):
    """The pristine pool reports exactly what it caches: a store for every
    block it caches, a removal for every hash it drops. A router indexes at
    most what the stream made live, so it never holds a hash the pool does
    not, and vLLM's rules give a hit no longer when less is held."""
    probe_replay = conformance.long_probes(config)["pristine"]
    over = [
        o
        for o in probe_replay.outcomes
        if o.predicted.combined > o.truth.combined
        or any(
            o.predicted.per_group[g] > o.truth.per_group[g]
            for g in groups_of(probe_replay)
        )
    ]
    assert over == [], f"{len(over)} probes, first {over[:1]}"


def rows(probe_replay) -> dict[str, object]:
    """The combined tally and each group's."""
    found = {"combined": probe_replay.tally()}
    for group in groups_of(probe_replay):
        found[f"group {group}"] = probe_replay.tally(group)
    return found


@pytest.mark.parametrize("config", list(CONFIGS))
def test_patched_is_never_less_exact_than_pristine(conformance, config):
    """What a router operator buys the stream for: per config and group, the
    patched router predicts the served hit exactly at least as often as the
    pristine one, and its wrong predictions cost no more tokens."""
    replays = conformance.long_probes(config)
    pristine, patched = rows(replays["pristine"]), rows(replays["patched"])
    worse = [
        (
            row,
            before.exact,
            after.exact,
            before.mispredicted_tokens,
            after.mispredicted_tokens,
        )
        for row, before in pristine.items()
        for after in [patched[row]]
        if after.exact < before.exact
        or after.mispredicted_tokens > before.mispredicted_tokens
    ]
    assert worse == [], f"(row, exact, exact, tokens, tokens): {worse}"


@pytest.mark.parametrize("config", list(CONFIGS))
def test_holdings_are_exact_and_ancestry_over_predicts_within_a_block(
    conformance, holdings, config
):
    """A stream that announces exactly what the pool holds lets a router that
    applies vLLM's lookup rules predict the served hit on every probe, in
    every group (the rules reproduce the lookup: the test above), but where
    its index refused a store (K6, which the strict tier leaves as released:
    in a sliding-window or Mamba group a hit can reach past the lost parent,
    and the router then predicts short, never long). A stream that adds
    ancestry over-predicts by less than one cache block of the group (an
    ancestry boundary lies inside the entry's block), as docs/contract.md
    states."""
    probe_replay = conformance.long_probes(config)["patched"]
    block_sizes = [group.block_size for group in probe_replay.layout.groups]
    wrong = []
    for o in probe_replay.outcomes:
        if holdings:
            pairs = zip(o.predicted.per_group, o.truth.per_group, strict=True)
            over = o.predicted.combined > o.truth.combined or any(
                p > t for p, t in pairs
            )
            if over or (o.predicted != o.truth and not any(o.refused)):
                wrong.append((o.op, o.origin, o.truth, o.predicted))
            continue
        for group, size in enumerate(block_sizes):
            if o.predicted.per_group[group] - o.truth.per_group[group] >= size:
                wrong.append((o.op, o.origin, group, o.truth, o.predicted))
    assert wrong == [], f"{len(wrong)} probes, first {wrong[:3]}"


@pytest.mark.parametrize("config", list(CONFIGS))
def test_patched_over_predicts_only_at_ancestry_boundaries(conformance, config):
    """Where the patched router predicts more than the engine serves in a
    group, the probe's hashes up to the predicted length include one that the
    router indexes and the pool does not hold, and every such hash was stored
    by an event the series added (an ancestry boundary: live in the stream,
    never a cache entry). That is the trade the series makes: pristine could
    not place the entry at all."""
    runs = conformance.long_pair(config)
    ancestry = added_store_hashes(runs["pristine"], runs["patched"])
    probe_replay = conformance.long_probes(config)["patched"]
    unexplained = []
    for outcome in probe_replay.outcomes:
        for group in groups_of(probe_replay):
            if outcome.predicted.per_group[group] > outcome.truth.per_group[group]:
                unheld = outcome.unheld[group]
                if not unheld or not unheld <= ancestry:
                    unexplained.append((outcome.op, group, outcome.origin))
    assert unexplained == [], f"(op, group, origin): {unexplained[:5]}"


@pytest.mark.parametrize("tree", TREES)
@pytest.mark.parametrize("config", list(CONFIGS))
def test_no_under_prediction_without_a_refused_store(conformance, config, tree):
    """A group whose index refused no store since the last AllBlocksCleared
    indexes exactly the stream's view (removals are sound, C2), and the view
    holds every hash the pool holds (C6): its prediction is at least the
    engine's hit, and so is the combined one when no group refused a store.
    In the strict tier's full-attention groups no store is refused at all."""
    probe_replay = conformance.long_probes(config)[tree]
    under = []
    for outcome in probe_replay.outcomes:
        for group in groups_of(probe_replay):
            if (
                not outcome.refused[group]
                and outcome.predicted.per_group[group] < outcome.truth.per_group[group]
            ):
                under.append((outcome.op, group))
        if (
            not any(outcome.refused)
            and outcome.predicted.combined < outcome.truth.combined
        ):
            under.append((outcome.op, "combined"))
    assert under == [], f"(op, group): {under[:5]}"


@pytest.mark.parametrize("config", list(CONFIGS))
def test_full_attention_predicts_no_less_than_pristine(conformance, config):
    """In a full-attention group every store the series adds names a parent
    the router holds (the full block before the entry, which the entry's
    request holds, or the boundary stored just before), so the patched index
    holds every hash the pristine index holds, as often; vLLM's rules give no
    shorter hit when more is held. Probe by probe, no full-attention group
    (nor the combined hit, when every group is full attention) is predicted
    shorter than in pristine: no tier under-predicts more than pristine there.
    Sparse groups (Mamba, sliding window) are measured, not asserted: their
    full-block stores can name a skipped block (K4), so an added store can be
    refused there."""
    replays = conformance.long_probes(config)
    layout = replays["patched"].layout
    full = [g for g, group in enumerate(layout.groups) if group.kind == FULL_ATTENTION]
    all_full = len(full) == len(layout.groups)
    shorter = []
    for before, after in zip(
        replays["pristine"].outcomes, replays["patched"].outcomes, strict=True
    ):
        for group in full:
            if after.predicted.per_group[group] < before.predicted.per_group[group]:
                shorter.append((after.op, group))
        if all_full and after.predicted.combined < before.predicted.combined:
            shorter.append((after.op, "combined"))
    assert shorter == [], f"(op, group): {shorter[:5]}"
