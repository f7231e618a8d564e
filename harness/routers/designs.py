"""An upstream pull request's design beside a change, measured with the same
seeded workloads, checker and consumers: what `export` quotes in a comment
for that pull request, and what benchmarks/upstream_designs.py prints.

The first tree is the baseline (vLLM as released); an upstream design is a
file of patches/alternatives/ applied to it, which may give `BlockStored`
#44488's optional ``skipped_parent_block_hash``, ``skipped_token_ids`` and
``skipped_extra_keys``. Every workload config runs with probe requests in
every tree (harness.routers.fidelity_table.probe_runs: one worker per tree,
``PYTHONHASHSEED=0``), and each run's stream is read by two consumers:

- ``ignoring``: one that ignores map keys it does not know, as NVIDIA
  Dynamo's decoder and the harness's own structs do: the stream as recorded;
- ``reading``: one that reads the ``skipped_*`` fields: each store that
  carries them read as what they say, its first block spanning the skipped
  tokens back to the skipped parent (one hash, ``block_size`` the span),
  then the rest of its blocks under it. On a stream without those fields it
  reads the same events.

For each consumer: the stream checker's findings per rule (C1-C6,
docs/contract.md) and per class (K1-K7), and the content-tree router's
predictions (harness.routers.fidelity). For each tree: events, their bytes
as the tree's encoder wrote them, and the baseline's events the tree does
not emit byte for byte in the same operation (C7). `side_by_side` also
replays every run into the consumers of `fidelity --router`
(harness.routers.real_routers: hash-set, content-tree, the model of llm-d's
rules, and Dynamo and vllm-router where the consumers extra is installed),
and the content-tree router into the reading consumer's stream.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import msgspec

from harness.contract.classes import CLASSES, RULES, matched_events, replay
from harness.contract.records import EventRecord, OpRecord, Record
from harness.contract.wire import BlockStored, ExternalBlockHash
from harness.routers import real_routers
from harness.routers.fidelity import Tally, replay_probes
from harness.routers.fidelity_table import probe_runs
from harness.routers.loop import content_tree_router, measure

CONSUMERS = ("ignoring", "reading")
# The workload an export measures a comment's trees with: every config,
# one seed, this many operations (minutes, not the benchmark's hour).
EXPORT_SEEDS, EXPORT_OPS = 1, 100
# The real routers' distributions, whose versions a comment names.
DISTRIBUTIONS = {"dynamo": "ai-dynamo-runtime", "vllm-router": "vllm-router"}
# The matrix's row of the content-tree router fed what the reading consumer reads.
READING_ROUTER = "content-tree, reading skipped_*"


class SkippedStore(BlockStored, tag="BlockStored"):
    """BlockStored as #44488 extends it."""

    skipped_parent_block_hash: ExternalBlockHash | None = None
    skipped_token_ids: list[int] | None = None
    skipped_extra_keys: list[tuple | None] | None = None


_encoder = msgspec.msgpack.Encoder()


def _store(store: SkippedStore, **fields) -> BlockStored:
    return BlockStored(
        lora_id=store.lora_id,
        medium=store.medium,
        lora_name=store.lora_name,
        group_idx=store.group_idx,
        kv_cache_spec_kind=store.kv_cache_spec_kind,
        kv_cache_spec_sliding_window=store.kv_cache_spec_sliding_window,
        **fields,
    )


def read_skipped(event: EventRecord) -> list[EventRecord]:
    """The event as a consumer that reads the skipped context sees it."""
    try:
        store = msgspec.msgpack.decode(event.data, type=SkippedStore)
    except msgspec.ValidationError:  # a removal or a clear
        return [event]
    if store.skipped_token_ids is None or not store.block_hashes:
        return [event]
    first_tokens = store.token_ids[: store.block_size]
    extra = store.extra_keys or None
    spanned = _store(
        store,
        block_hashes=store.block_hashes[:1],
        parent_block_hash=store.skipped_parent_block_hash,
        token_ids=store.skipped_token_ids + first_tokens,
        block_size=len(store.skipped_token_ids) + len(first_tokens),
        extra_keys=extra[:1] if extra else None,
    )
    found = [EventRecord(event.label, _encoder.encode(spanned))]
    if len(store.block_hashes) > 1:
        rest = _store(
            store,
            block_hashes=store.block_hashes[1:],
            parent_block_hash=store.block_hashes[0],
            token_ids=store.token_ids[store.block_size :],
            block_size=store.block_size,
            extra_keys=extra[1:] if extra else None,
        )
        found.append(EventRecord(event.label, _encoder.encode(rest)))
    return found


def reading(records: list[Record]) -> list[Record]:
    """A run's records as the reading consumer reads them."""
    return [
        OpRecord(
            record.index,
            record.name,
            [seen for event in record.events for seen in read_skipped(event)],
        )
        if isinstance(record, OpRecord)
        else record
        for record in records
    ]


class TreeFigures:
    """One tree's events, bytes and findings, per consumer, over every run."""

    def __init__(self):
        self.events = 0
        self.bytes = 0
        self.changed = 0  # baseline events not emitted byte for byte
        self.rules = {name: Counter() for name in CONSUMERS}
        self.classes = {name: Counter() for name in CONSUMERS}
        self.router = {name: Tally() for name in CONSUMERS}
        self.tests: dict[str, int] | None = None

    def add(self, records: list[Record], baseline: list[Record]) -> None:
        ops = [r for r in records if isinstance(r, OpRecord)]
        base_ops = [r for r in baseline if isinstance(r, OpRecord)]
        self.events += sum(len(op.events) for op in ops)
        self.bytes += sum(len(event.data) for op in ops for event in op.events)
        for before, after in zip(base_ops, ops, strict=True):
            self.changed += len(before.events) - len(
                matched_events(before.events, after.events)
            )
        for name, seen in (("ignoring", records), ("reading", reading(records))):
            run = replay(seen)
            self.rules[name].update(run.rules)
            self.classes[name].update(run.classes)
            self.router[name].merge(replay_probes(seen).tally())

    def as_json(self) -> dict:
        return {
            "events": self.events,
            "bytes": self.bytes,
            "pristine_events_changed": self.changed,
            "consumers": {
                name: {
                    "rules": {rule: self.rules[name][rule] for rule in RULES},
                    "classes": {cls: self.classes[name][cls] for cls in CLASSES},
                    "router": vars(self.router[name]),
                }
                for name in CONSUMERS
            },
            "tests": self.tests,
        }


def _each_run(trees, configs, seeds, ops, probes):
    """(config, tree, records, the baseline's records) of every run, the
    baseline's first in each (config, seed)."""
    baseline_name = next(iter(trees))
    baseline: list[Record] = []
    for config, name, records, _replay in probe_runs(
        trees, configs, seeds, ops, probes
    ):
        if name == baseline_name:
            baseline = records
        yield config, name, records, baseline


def measure_trees(trees, configs, seeds, ops, probes) -> dict[str, TreeFigures]:
    """Each tree's figures, its events compared with the first tree's."""
    figures = {name: TreeFigures() for name in trees}
    for _config, name, records, baseline in _each_run(
        trees, configs, seeds, ops, probes
    ):
        figures[name].add(records, baseline)
    return figures


def side_by_side(
    trees: dict[str, Path],
    configs: list[str],
    seeds: int,
    ops: int,
    probes: int,
    routers: list[str],
) -> dict:
    """Every tree's figures and its consumers' predictions (`matrix`:
    consumer -> tree -> tally, every config together), as JSON; ``routers``
    are the consumers of `fidelity --router` besides the index routers."""
    figures = {name: TreeFigures() for name in trees}
    table = real_routers.RoutersTable(seeds, ops, probes)
    for config, name, records, baseline in _each_run(
        trees, configs, seeds, ops, probes
    ):
        figures[name].add(records, baseline)
        real_routers.add_run(table, config, name, records, routers)
        read = reading(records)
        table.add(
            config,
            name,
            READING_ROUTER,
            0,
            "",
            measure(read, content_tree_router(read)),
        )
    matrix: dict[str, dict[str, dict]] = {}
    for (router, kind, tree), cell in table.totals().items():
        if kind != "other":
            label = real_routers.consumer_label(router, kind)
            matrix.setdefault(label, {})[tree] = vars(cell.tally)
    return {
        "workloads": {
            "configs": list(configs),
            "seeds": seeds,
            "ops": ops,
            "probes": probes,
        },
        "trees": {name: found.as_json() for name, found in figures.items()},
        "matrix": matrix,
    }


def at_export(trees: dict[str, Path]) -> dict:
    """`side_by_side` over every workload config with the export's small
    workload, into every consumer this Python has: the real routers only
    with the consumers extra (``left_out`` says which were not measured,
    ``missing`` the packages they need; ``versions`` the real routers'
    releases)."""
    from importlib import metadata

    from harness.routers import DEFAULT_PROBES, ROUTER_NAMES
    from harness.trees.preflight import extra
    from harness.workloads.drivers import CONFIGS

    missing = extra("consumers")
    real = [] if missing else list(ROUTER_NAMES)
    found = side_by_side(
        trees,
        list(CONFIGS),
        EXPORT_SEEDS,
        EXPORT_OPS,
        DEFAULT_PROBES,
        [real_routers.LLMD_MODEL, *real],
    )
    found["real_routers"] = real
    found["left_out"] = [] if real else list(ROUTER_NAMES)
    found["missing"] = (
        ", ".join(DISTRIBUTIONS[name] for name in ROUTER_NAMES) if missing else None
    )
    found["versions"] = {name: metadata.version(DISTRIBUTIONS[name]) for name in real}
    return found
