"""The series against the stream contract, pristine tree beside patched tree.

Every workload runs the same seeded operations in both trees (see
harness/workloads/workloads.py); the checker replays both streams. What must hold on
the patched tree: the classes its tier fixes are gone, no other class grows,
C2-C6 hold, and its stream is the pristine stream plus ancestry events only,
or (a tier whose stream is the pool's holdings) the pristine stream with its
partial-entry and K4 stores rewritten and every live hash one the pool holds
(C6 both ways, C7).
"""

from collections import Counter

import msgspec
import pytest

from harness.contract.classes import (
    CLASSES,
    new_live_stores,
    vllm_hash_model,
    wire_differences,
)
from harness.contract.wire import BlockStored, decode_event
from harness.workloads.drivers import CONFIGS
from harness.workloads.scenarios import SCENARIOS
from harness.workloads.workloads import BOOKKEEPING_ATTRIBUTES

# C1 and C3 findings belong to classes (checked per class below); these
# rules hold outright.
RULES_THAT_MUST_HOLD = ("C2", "C4", "C5", "C6")


def replay_command(config: str, seed: int, ops: int, probes: int = 0) -> str:
    return (
        "PYTHONPATH=<tree>:. VLLM_TARGET_DEVICE=cpu PYTHONHASHSEED=0 "
        "python -m harness workloads "
        f"--config {config} --seed {seed} --ops {ops} --out run.bin --stream stream.bin"
        + (f" --probes {probes}" if probes else "")
    )


def assert_conforms(
    conformance,
    tier_fixes,
    config: str,
    seed: int,
    ops: int,
    probes: int = 0,
    holdings: bool = False,
):
    """Everything the contract asks of one workload pair."""
    runs = conformance.pair(config, seed, ops, probes)
    pristine, patched = runs["pristine"], runs["patched"]
    replay = f"replay: {replay_command(config, seed, ops, probes)}"
    for name, run in runs.items():
        unclassified = [str(violation) for _, violation in run.unclassified()]
        assert unclassified == [], f"{name}: findings outside K1-K5; {replay}"
    for rule in RULES_THAT_MUST_HOLD:
        found = [str(v) for _, v in patched.findings if v.rule == rule]
        assert found == [], f"patched breaks {rule}; {replay}"
    for cls in CLASSES:
        # The message (and its witnesses) is only built when the check fails.
        witnesses = (
            [str(store) for store in new_live_stores(pristine, patched)[:5]]
            if cls == "K5"
            else ""
        )
        message = (
            f"{cls}: pristine {pristine.classes[cls]}, patched "
            f"{patched.classes[cls]}; {replay}; {witnesses}"
        )
        if cls in tier_fixes:
            assert patched.classes[cls] == 0, message
        else:
            # A class the tier leaves alone may only shrink: with C7 (checked
            # below) only the events the tier adds or rewrites can resolve a
            # parent.
            assert patched.classes[cls] <= pristine.classes[cls], message
    # Never worse, operation by operation (docs/contract.md): a class the
    # tier does not fix counts no more in any operation than pristine's.
    before, after = classes_by_op(pristine), classes_by_op(patched)
    worse = sorted(
        f"op {op} {cls}: {before[op, cls]} -> {count}"
        for (op, cls), count in after.items()
        if cls not in tier_fixes and count > before[op, cls]
    )
    assert worse == [], f"worse than pristine in {worse[:5]}; {replay}"
    differences = wire_differences(
        pristine, patched, rewrites=tier_fixes, holdings=holdings
    )
    assert differences == [], f"C7; {replay}"
    if holdings:
        # C6 both ways: every hash live in the stream is one the pool holds,
        # but for those the pristine stream also keeps after the pool let
        # them go (it stores some held hashes twice and removes them once).
        extra = [
            (snapshot, sorted(after - before, key=repr)[:3])
            for snapshot, (before, after) in enumerate(
                zip(pristine.unheld_live, patched.unheld_live, strict=True)
            )
            if not after <= before
        ]
        assert extra == [], f"live hashes the pool does not hold: {extra[:3]}; {replay}"


def classes_by_op(run) -> Counter:
    """Findings per (operation, class)."""
    return Counter(
        (violation.batch, name) for name, violation in run.findings if name in CLASSES
    )


def chain_hashes(start, tokens: list[int]) -> dict[int, object]:
    """External hash at each hash-block boundary of ``tokens``, by length."""
    model = vllm_hash_model(start)
    chain, hashes = None, {}
    for end in range(model.hash_block_size, len(tokens) + 1, model.hash_block_size):
        chain = model.chunk_hash(
            chain, tuple(tokens[end - model.hash_block_size : end]), None
        )
        hashes[end] = model.external(chain)
    return hashes


def stores(run, op: int) -> list[BlockStored]:
    return [decode_event(event.data) for event in run.ops[op].events]


@pytest.mark.parametrize("tree", ["pristine", "patched"])
def test_checker_structs_decode_every_field_vllm_sends(conformance, tree):
    """The checker's wire structs decode what vLLM's encoder wrote into the
    same fields and values, so the checker sees every field vLLM sends.

    Compared as decoded maps rather than re-encoded bytes: msgspec sizes a
    map's header from the declared field count, which differs between vLLM
    releases (0.32 declares more fields than 0.33)."""
    run = conformance.long_pair("pool-16x64")[tree]
    encoded = [event.data for op in run.ops for event in op.events]
    assert encoded
    assert [msgspec.to_builtins(decode_event(data)) for data in encoded] == [
        msgspec.msgpack.decode(data) for data in encoded
    ]


def test_seed_example_pristine_leaves_the_entry_parent_unreported(conformance):
    pristine = conformance.pair("seed-1800", 0, 2)["pristine"]
    h = chain_hashes(pristine.start, list(range(1800)))
    events = stores(pristine, 0)
    assert [(e.block_hashes, e.parent_block_hash) for e in events] == [
        ([h[1536]], None),
        ([h[1792]], h[1664]),
    ]
    [(name, violation)] = pristine.findings
    assert (name, violation.rule, violation.hashes) == ("K1", "C1", (h[1664], h[1792]))


def test_seed_example_patched_reports_the_entry_under_a_reported_parent(
    conformance, holdings
):
    if holdings:
        assert_seed_example_holdings(conformance)
    else:
        assert_seed_example_ancestry(conformance)


def assert_seed_example_holdings(conformance):
    """The entry is stored from its cache block's start, under the full
    block the pool holds: no boundary that no lookup ends at is announced."""
    patched = conformance.pair("seed-1800", 0, 2)["patched"]
    h = chain_hashes(patched.start, list(range(1800)))
    events = stores(patched, 0)
    assert [e.block_hashes for e in events] == [[h[1536]], [h[1792]]]
    assert [e.parent_block_hash for e in events] == [None, h[1536]]
    assert [e.token_ids for e in events] == [
        list(range(0, 1536)),
        list(range(1536, 1792)),
    ]
    assert [e.block_size for e in events] == [1536, 256]
    assert patched.findings == []


def assert_seed_example_ancestry(conformance):
    """The boundary the entry names is stored under the full block before
    the entry, and removed right after it: the pool serves no hit there."""
    patched = conformance.pair("seed-1800", 0, 2)["patched"]
    h = chain_hashes(patched.start, list(range(1800)))
    events = stores(patched, 0)
    assert [type(e).__name__ for e in events] == ["BlockStored"] * 3 + ["BlockRemoved"]
    assert [e.block_hashes for e in events] == [
        [h[1536]],
        [h[1664]],
        [h[1792]],
        [h[1664]],
    ]
    assert [e.parent_block_hash for e in events[:3]] == [None, h[1536], h[1664]]
    assert [e.token_ids for e in events[:3]] == [
        list(range(0, 1536)),
        list(range(1536, 1664)),
        list(range(1664, 1792)),
    ]
    assert [e.block_size for e in events[:3]] == [1536, 128, 128]
    assert patched.findings == []


@pytest.mark.parametrize("config", list(CONFIGS))
def test_long_workload_conforms(conformance, tier_fixes, holdings, config):
    assert_conforms(
        conformance, tier_fixes, config, *conformance.long_workload, holdings=holdings
    )


@pytest.mark.parametrize("config", list(CONFIGS))
def test_pristine_shows_k1_and_patched_fixes_it(conformance, config):
    """K1 (or K7, where another group holds the boundaries, as every
    boundary in manager-full's hash-block-sized group) wherever the driven
    code registers partial entries. Before vLLM 0.26 the KVCacheManager never
    does (only the pool's own API has them), so a manager-driven workload
    there has no partial entry and no K1."""
    runs = conformance.long_pair(config)
    pristine = runs["pristine"]
    if pristine.start.partial_entries:
        assert pristine.classes["K1"] + pristine.classes["K7"] > 0
    else:
        registrations = [
            event.label
            for op in pristine.ops
            for event in op.events
            if event.label.startswith("partial:")
        ]
        assert registrations == [], "the tree says its managers register none"
        assert pristine.classes["K1"] == 0
    assert runs["patched"].start.partial_entries == pristine.start.partial_entries
    assert runs["patched"].classes["K1"] == 0


@pytest.mark.parametrize("config", list(CONFIGS))
def test_series_keeps_no_state_but_the_groups_it_has_seen(
    conformance, holdings, config
):
    """Nothing the series reports depends on a past call: a holdings tier
    keeps nothing beside the pool's own hash map, an ancestry tier only the
    KV cache groups it has seen (whose hashes share one external space)."""
    runs = conformance.long_pair(config)
    samples = runs["patched"].bookkeeping
    assert set(runs["pristine"].bookkeeping) == {None}
    if holdings:
        assert set(samples) == {None}
        return
    assert None not in samples, f"patched pool has none of {BOOKKEEPING_ATTRIBUTES}"
    groups = len(runs["patched"].start.block_sizes)
    assert max(sample["_event_group_ids"] for sample in samples) <= groups


# The shorter seeded workloads every verdict runs beside the long ones. They
# are the examples Hypothesis drew (derandomized, 30 of them) for the verdicts
# this list was taken from: its later draws depended on more than its seed
# and changed when the harness's code moved while the test did not, so two
# verdicts could differ in their workloads. Written down, every verdict runs
# the same ones and counts compare between runs, trees and harness versions.
# The first is the one written down before: an ancestry store of a boundary
# the pool already holds as an entry (the patched stream stores a live hash
# again, K5 grows).
SEEDED_WORKLOADS = [
    ("pool-2x6", 44, 41),
    ("pool-128x1536", 0, 20),
    ("manager-mamba", 0, 20),
    ("manager-mamba", 732878657, 46),
    ("pool-16x64", 0, 20),
    ("pool-16x64", 115279, 39),
    ("pool-16x64", 997273, 112),
    ("manager-mamba", 1048576, 115),
    ("pool-128x1536", 435, 107),
    ("pool-4x12", 92521, 160),
    ("pool-2x6", 9195, 148),
    ("manager-swa", 42091, 73),
    ("manager-swa", 73, 73),
    ("pool-2x6", 3283, 144),
    ("pool-2x6", 144, 144),
    ("manager-swa", 12630635, 141),
    ("manager-swa", 141, 141),
    ("pool-2x6", 1000, 46),
    ("pool-2x6", 1000, 20),
    ("pool-2x6", 20, 20),
    ("pool-4x12", 871, 155),
    ("pool-4x12", 871, 20),
    ("pool-4x12", 20, 20),
    ("pool-16x64", 714, 157),
    ("pool-16x64", 714, 20),
    ("pool-16x64", 20, 20),
    ("manager-swa", 57184, 128),
    ("manager-swa", 128, 128),
    ("pool-4x12", 139926722, 149),
    ("pool-4x12", 149, 149),
    ("manager-mamba", 542, 137),
]


@pytest.mark.parametrize(
    ("config", "seed", "ops"),
    SEEDED_WORKLOADS,
    ids=[f"{config}-{seed}-{ops}" for config, seed, ops in SEEDED_WORKLOADS],
)
def test_seeded_workloads_conform(conformance, tier_fixes, holdings, config, seed, ops):
    assert_conforms(conformance, tier_fixes, config, seed, ops, holdings=holdings)


@pytest.mark.parametrize(
    "scenario", [name for name in SCENARIOS if name.startswith("s1-")]
)
def test_entry_whose_block_start_is_gone_is_never_worse(
    conformance, tier_fixes, holdings, scenario
):
    """A partial entry registered while its cache block's start is held
    nowhere (evicted in use, or a null block) and the boundary before it is
    live as a copy elsewhere: pristine's store of the entry resolves, and so
    must the patched stream's (harness.workloads.scenarios). No tier spans a
    block start the pool lost before the call (K6): each stores the entry as
    released, after a null block and after a block evicted in use alike."""
    runs = conformance.pair(scenario, 0, 0)
    assert_conforms(conformance, tier_fixes, scenario, 0, 0, holdings=holdings)
    registration = next(
        op.index for op in runs["pristine"].ops if op.name.endswith("-entry-at-16")
    )
    for name, run in runs.items():
        h = chain_hashes(run.start, list(range(18)))
        entry = decode_event(run.ops[registration].events[-1].data)
        assert isinstance(entry, BlockStored), name
        assert (entry.block_hashes, entry.parent_block_hash) == ([h[16]], h[14])
        found = [str(v) for _, v in run.findings if v.batch == registration]
        assert found == [], f"{name}: the entry at 16 does not resolve"


def test_a_reset_reaches_the_stream_when_it_happens(conformance):
    """C9. Released vLLM's Scheduler.reset_prefix_cache() publishes nothing:
    the pool's AllBlocksCleared waits for the next step's output, after the
    next request was routed (this pins it). Every tier carries 0001, which
    publishes it at once."""
    timing = conformance.reset_timing()
    assert timing == {"pristine": False, "patched": True}
