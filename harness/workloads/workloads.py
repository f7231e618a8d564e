"""Seeded workloads that drive a vLLM tree's own KV-cache code, recorded.

Run inside the interpreter of the tree under test (the `workloads` verb):

    PYTHONPATH=<vllm tree> VLLM_TARGET_DEVICE=cpu \\
        python -m harness workloads --config NAME --seed S --ops N --out FILE

A workload builds a driver (harness.workloads.drivers), labels what each pool
operation emits (harness.workloads.labeller) and writes the records of
harness.contract.records; ``--stream FILE`` also writes the events as
`KVEventBatch` payloads, one per operation, for ``check-stream``;
``--probes N`` also looks N probe requests up at each quiet point
(harness.workloads.probes), for the router-fidelity measure. `handle`
answers the requests of a worker (harness.workloads.worker) so that callers
running many workloads import the tree once.
"""

from __future__ import annotations

import functools
import json
import os
import random
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from harness.contract.records import (
    BookkeepingSample,
    EventRecord,
    OpRecord,
    PoolSnapshot,
    Record,
    RunEnd,
    RunStart,
    encode_record,
)
from harness.contract.wire import ExternalBlockHash
from harness.workloads.compat import (
    managers_register_partial_entries,
    pool_medium,
    pool_methods,
)
from harness.workloads.drivers import WORKLOADS, evict_everything
from harness.workloads.labeller import EventLabeller
from harness.workloads.probes import Prober
from harness.workloads.scenarios import SCENARIOS

# How a worker (harness.workloads.worker) that runs workloads is started.
WORKER_COMMAND = ["-m", "harness", "workloads", "--serve"]

# The state the series keeps in a pool between calls: the default tier, the
# KV cache groups it has seen; the strict tier, none. Absent on a pristine
# tree (and on a tree whose series keeps nothing).
BOOKKEEPING_ATTRIBUTES = ("_event_group_ids",)


def bookkeeping_sizes(pool: Any) -> dict[str, int] | None:
    """Entries in each bookkeeping structure; nested containers count their
    leaves."""
    sizes = {}
    for name in BOOKKEEPING_ATTRIBUTES:
        value = getattr(pool, name, None)
        if value is not None:
            values = value.values() if isinstance(value, dict) else value
            sizes[name] = sum(
                len(inner) if isinstance(inner, dict | set) else 1 for inner in values
            )
    return sizes or None


def held_hashes(pool: Any) -> dict[int, list[ExternalBlockHash]]:
    from vllm.v1.core.kv_cache_utils import (
        get_block_hash,
        get_group_id,
        maybe_convert_block_hash,
    )

    held: dict[int, list[ExternalBlockHash]] = {}
    for key in pool.cached_block_hash_to_block._cache:
        held.setdefault(get_group_id(key), []).append(
            maybe_convert_block_hash(get_block_hash(key))
        )
    return held


class Recorder:
    """Takes each operation's events from the pool and writes the records."""

    def __init__(
        self, driver, labeller: EventLabeller, out, stream, prober: Prober | None = None
    ):
        self.driver = driver
        self.labeller = labeller
        self.out = out
        self.stream = stream
        self.prober = prober
        self.encoder = msgspec.msgpack.Encoder()

    def write(self, record: Record) -> None:
        self.out.write(encode_record(record))

    def op(self, index: int, name: str) -> None:
        from vllm.distributed.kv_events import KVEventBatch

        take = getattr(self.driver, "manager", self.driver.pool).take_events
        events = self.labeller.take(take())
        self.write(
            OpRecord(
                index,
                name,
                [
                    EventRecord(label, self.encoder.encode(event))
                    for label, event in events
                ],
            )
        )
        self.write(PoolSnapshot(index, held_hashes(self.driver.pool)))
        self.write(BookkeepingSample(index, bookkeeping_sizes(self.driver.pool)))
        if self.prober is not None:
            self.write(self.prober.record(index))
        if self.stream is not None and events:
            batch = KVEventBatch(ts=float(index), events=[event for _, event in events])
            self.stream.write(self.encoder.encode(batch))


def init_hashing() -> None:
    """vLLM's block hashing as the engine sets it up (NONE_HASH included)."""
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import init_none_hash

    init_none_hash(sha256)


def build(config: str, seed: int):
    init_hashing()
    driver = WORKLOADS[config](random.Random(seed))
    return driver, EventLabeller(driver.pool, driver.group_kinds)


def run_start(config: str, seed: int, ops: int, driver) -> RunStart:
    import vllm
    import vllm.envs as envs
    from vllm.v1.core import kv_cache_utils

    return RunStart(
        config=config,
        seed=seed,
        ops=ops,
        hash_block_size=driver.pool.hash_block_size,
        num_blocks=driver.pool.num_gpu_blocks,
        block_sizes=driver.block_sizes,
        group_kinds=driver.group_kinds,
        medium=pool_medium(driver.pool),
        none_hash=kv_cache_utils.NONE_HASH,
        int_block_hashes=envs.VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES,
        tree=os.path.dirname(os.path.dirname(vllm.__file__)),
        partial_entries=(
            not hasattr(driver, "manager") or managers_register_partial_entries()
        ),
        report_mode=report_mode(driver),
    )


def report_mode(driver) -> str:
    """The KV-event report mode the driven requests ask for, where the tree
    honours it (`emit_cached_block_events`, vLLM 0.26 on)."""
    if not pool_methods(driver.pool, ["emit_cached_block_events"]):
        return "incremental"
    return getattr(getattr(driver, "prompts", None), "report_mode", "incremental")


def record(
    driver,
    labeller: EventLabeller,
    start: RunStart,
    steps: list[Callable[[], str]],
    out: Path,
    stream: Path | None = None,
    prober: Prober | None = None,
) -> None:
    """Write a run's records: its start, one operation per step (a step
    drives the pool and returns the operation's name), then evicting
    everything."""
    with (
        out.open("wb") as sink,
        (
            stream.open("wb") if stream is not None else open(os.devnull, "wb")
        ) as stream_sink,
    ):
        recorder = Recorder(driver, labeller, sink, stream_sink, prober)
        recorder.write(start)
        if prober is not None:
            recorder.write(prober.setup())
        for index, step in enumerate(steps):
            recorder.op(index, step())
        drained = evict_everything(driver)
        recorder.op(len(steps), "evict-everything")
        recorder.write(RunEnd(drained))


def run_workload(
    config: str,
    seed: int,
    ops: int,
    out: Path,
    stream: Path | None = None,
    probes: int = 0,
) -> None:
    driver, labeller = build(config, seed)
    prober = Prober(driver, seed, probes) if probes else None
    start = run_start(config, seed, ops, driver)
    record(driver, labeller, start, [driver.step] * ops, out, stream, prober)


def run_scenario(name: str, out: Path, stream: Path | None = None) -> None:
    """A scripted workload of harness.workloads.scenarios (its steps free what they
    allocate, so evicting everything empties the pool)."""
    init_hashing()
    driver = SCENARIOS[name].driver()
    labeller = EventLabeller(driver.pool, driver.group_kinds)
    steps = [
        functools.partial(step, driver.pool)
        for step in SCENARIOS[name].steps(driver.pool)
    ]
    record(driver, labeller, run_start(name, 0, len(steps), driver), steps, out, stream)


def soak(config: str, seed: int, ops: int, sample_every: int) -> dict[str, Any]:
    """Run many operations, sampling the series' bookkeeping and replaying
    the stream through the checker; writes no records."""
    from vllm.distributed.kv_events import KVEventBatch

    from harness.contract.checker import StreamChecker
    from harness.contract.wire import decode_batches

    driver, labeller = build(config, seed)
    take = getattr(driver, "manager", driver.pool).take_events
    encoder = msgspec.msgpack.Encoder()
    checker = StreamChecker()

    def replay_events() -> None:
        events = [event for _, event in labeller.take(take())]
        payload = encoder.encode(KVEventBatch(ts=0.0, events=events))
        for _, batch in decode_batches(payload):
            checker.apply(batch.events)

    samples = []
    started = time.monotonic()
    for index in range(ops):
        driver.step()
        replay_events()
        if index % sample_every == 0:
            samples.append(bookkeeping_sizes(driver.pool))
    drained = evict_everything(driver)
    replay_events()
    if drained:
        checker.check_drained()
    final = bookkeeping_sizes(driver.pool)
    halves = samples[: len(samples) // 2], samples[len(samples) // 2 :]
    return {
        "config": config,
        "ops": ops,
        "seconds": round(time.monotonic() - started, 1),
        "blocks": driver.pool.num_gpu_blocks,
        "events": checker.events,
        "violations": dict(Counter(v.rule for v in checker.violations)),
        "bookkeeping": None
        if final is None
        else {
            name: {
                "peak_first_half": max(sample[name] for sample in halves[0]),
                "peak_second_half": max(sample[name] for sample in halves[1]),
                "after_evicting_everything": final[name],
            }
            for name in final
        },
    }


def handle(request: dict[str, Any]) -> None:
    """A worker's request: ``{"config", "seed", "ops", "out"}`` runs a
    workload into the record file ``out`` (a scripted one, seed and ops
    ignored, for the names of SCENARIOS); ``"probes": N`` adds N probes per
    quiet point of a seeded one. ``{"reset_probe": true, "out"}`` writes to
    ``out``, as JSON, whether the tree's scheduler publishes a reset at once
    (harness.workloads.reset_probe)."""
    if request.get("reset_probe"):
        from harness.workloads.reset_probe import reset_publishes_at_once

        answer = {"published_at_reset": reset_publishes_at_once()}
        Path(request["out"]).write_text(json.dumps(answer))
        return
    if request["config"] in SCENARIOS:
        run_scenario(request["config"], Path(request["out"]))
    else:
        run_workload(
            request["config"],
            request["seed"],
            request["ops"],
            Path(request["out"]),
            probes=request.get("probes", 0),
        )
