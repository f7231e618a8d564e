"""Upstream's design for vLLM #58119 beside this project's tiers, measured
with the same workloads and checks (docs/upstream-designs.md).

    python benchmarks/upstream_designs.py --tree pristine=$P --tree default=$D \
        --tree strict=$S --tree upstream=$U [--config NAME ...] [--seeds 3] \
        [--ops 300] [--probes 4] [--tests NAME ...] [--json FILE]

The first ``--tree`` is the baseline (vLLM as released); ``upstream`` is
patches/alternatives/upstream-44488-58121.patch applied to it, a benchmark
input that is no tier. Every workload config runs with probe requests in
every tree (harness.routers.fidelity_table.probe_runs: one worker per tree,
``PYTHONHASHSEED=0``), and each run's stream is read by two consumers:

- one that ignores map keys it does not know, as NVIDIA Dynamo's decoder
  and the harness's own structs do: the stream as recorded;
- one that reads ``skipped_parent_block_hash``, ``skipped_token_ids`` and
  ``skipped_extra_keys``: each store that carries them is read as what they
  say, its first block spanning the skipped tokens back to the skipped
  parent (one hash, ``block_size`` the span), then the rest of its blocks
  under it. On a stream without those fields it reads the same events.

For each consumer: the stream checker's findings per rule (C1-C6,
docs/contract.md) and per class (K1-K7), and the content-tree router's
predictions against the engine's own lookup (harness.routers.fidelity:
exact, over, under). For each tree: events, their bytes as the tree's
encoder wrote them, and the baseline's events that the tree does not emit
byte for byte in the same operation (C7). ``--tests NAME`` also runs target
main's CI selection of vLLM's tests in tree NAME, as `python -m harness
test` runs them. Prints a markdown table; ``--json`` writes the figures for
harness/submission/upstream_designs.py, which quotes them in pr-body.md.

Runs in an environment with vLLM 0.33's requirements (.tox/vllm-main).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from collections import Counter
from pathlib import Path

import msgspec
from benchlib import REPO_ROOT, add_tree_argument, machine, machine_line, parse_trees

from harness.contract.classes import CLASSES, RULES, matched_events, replay
from harness.contract.records import EventRecord, OpRecord, Record
from harness.contract.wire import BlockStored, ExternalBlockHash
from harness.routers import DEFAULT_OPS, DEFAULT_PROBES, DEFAULT_SEEDS
from harness.routers.fidelity import Tally, replay_probes
from harness.routers.fidelity_table import probe_runs
from harness.workloads.drivers import CONFIGS

CONSUMERS = ("ignoring", "reading")


class SkippedStore(BlockStored, tag="BlockStored"):
    """BlockStored as #44488 extends it."""

    skipped_parent_block_hash: ExternalBlockHash | None = None
    skipped_token_ids: list[int] | None = None
    skipped_extra_keys: list[tuple | None] | None = None


_encoder = msgspec.msgpack.Encoder()


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
    spanned = BlockStored(
        block_hashes=store.block_hashes[:1],
        parent_block_hash=store.skipped_parent_block_hash,
        token_ids=store.skipped_token_ids + first_tokens,
        block_size=len(store.skipped_token_ids) + len(first_tokens),
        lora_id=store.lora_id,
        medium=store.medium,
        lora_name=store.lora_name,
        extra_keys=extra[:1] if extra else None,
        group_idx=store.group_idx,
        kv_cache_spec_kind=store.kv_cache_spec_kind,
        kv_cache_spec_sliding_window=store.kv_cache_spec_sliding_window,
    )
    found = [EventRecord(event.label, _encoder.encode(spanned))]
    if len(store.block_hashes) > 1:
        rest = BlockStored(
            block_hashes=store.block_hashes[1:],
            parent_block_hash=store.block_hashes[0],
            token_ids=store.token_ids[store.block_size :],
            block_size=store.block_size,
            lora_id=store.lora_id,
            medium=store.medium,
            lora_name=store.lora_name,
            extra_keys=extra[1:] if extra else None,
            group_idx=store.group_idx,
            kv_cache_spec_kind=store.kv_cache_spec_kind,
            kv_cache_spec_sliding_window=store.kv_cache_spec_sliding_window,
        )
        found.append(EventRecord(event.label, _encoder.encode(rest)))
    return found


def reading(records: list[Record]) -> list[Record]:
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


def measure(trees, configs, seeds, ops, probes) -> dict[str, TreeFigures]:
    figures = {name: TreeFigures() for name in trees}
    baseline_name = next(iter(trees))
    pending: dict[str, list[Record]] = {}
    for _config, name, records, _replay in probe_runs(
        trees, configs, seeds, ops, probes
    ):
        pending[name] = records
        if len(pending) == len(trees):
            baseline = pending[baseline_name]
            for tree, found in pending.items():
                figures[tree].add(found, baseline)
            pending = {}
    return figures


def run_tests(tree: Path, name: str) -> dict[str, int]:
    from harness.suites.upstream import run_upstream
    from harness.targets import get_target

    outcomes = run_upstream(tree, get_target("main").selection("ci"), "2", name)
    return dict(Counter(outcomes.values()))


def render(figures: dict[str, TreeFigures]) -> str:
    lines = [
        "| tree | events | bytes per event | release events not kept byte for "
        "byte | consumer | parents not live (C1) | span mismatches (C3) | "
        "router exact % | over | under | vLLM's tests passed / failed |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for tree, found in figures.items():
        for name in CONSUMERS:
            router = found.router[name]
            tests = found.tests
            lines.append(
                f"| {tree} | {found.events} | {found.bytes / found.events:.1f} | "
                f"{found.changed} | {name} skipped_* | {found.rules[name]['C1']} | "
                f"{found.rules[name]['C3']} | {router.exact_pct:.1f} | "
                f"{router.over} | {router.under} | "
                + (
                    f"{tests.get('passed', 0)} / "
                    f"{tests.get('failed', 0) + tests.get('error', 0)}"
                    if tests
                    else "-"
                )
                + " |"
            )
    return "\n".join(lines)


def revision() -> str:
    try:
        found = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        return found.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_tree_argument(parser)
    parser.add_argument("--config", dest="configs", action="append", choices=CONFIGS)
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS)
    parser.add_argument("--ops", type=int, default=DEFAULT_OPS)
    parser.add_argument("--probes", type=int, default=DEFAULT_PROBES)
    parser.add_argument(
        "--tests",
        action="append",
        default=[],
        metavar="NAME",
        help="also run vLLM's CI selection in tree NAME",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    trees = parse_trees(args.tree, ("default", "strict"))
    configs = args.configs or list(CONFIGS)
    started = time.monotonic()
    info = machine()
    figures = measure(trees, configs, args.seeds, args.ops, args.probes)
    for name in args.tests:
        figures[name].tests = run_tests(trees[name], name)
    print(machine_line(info))
    print(
        f"{len(configs)} configs x {args.seeds} seeds x {args.ops} operations, "
        f"{args.probes} probes per quiet point; {time.monotonic() - started:.0f} s"
    )
    print(render(figures))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "target": "main",
                    "release": "vLLM 0.33.0",
                    "measured": time.strftime("%Y-%m-%d", time.gmtime()),
                    "revision": revision(),
                    "machine": info,
                    "workloads": {
                        "configs": configs,
                        "seeds": args.seeds,
                        "ops": args.ops,
                        "probes": args.probes,
                    },
                    "trees": {name: found.as_json() for name, found in figures.items()},
                },
                indent=1,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
