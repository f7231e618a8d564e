"""One loop that measures any KV-aware router against the engine's own hits.

A router, to this loop, is a `Router`: events in, a predicted hit out, and
its own account of what it used and dropped of the stream. Two routers
built from harness.routers.router's index and vLLM's own lookup rules
(`HashSetRouter`: every announced hash, no parent check; `ContentTreeRouter`:
a store whose parent it does not hold is refused), a model of llm-d's rules,
Dynamo's relay and indexer and vllm-router's kv_aware policy
(harness.routers) are measured by the same `measure`, and an operator
measures theirs by writing one more adapter.

`measure` replays a workload run recorded with probes
(harness.workloads.probes): each operation's events are one batch, as the
engine's publisher sends them after a step; at each quiet point the router
is let settle (everything published applied), then asked each probe. The
truth is the engine's own hit at that point (``Probe.hit``, every group
together). A router answers in tokens credited to the worker; the loop
bounds the answer by what any router knows of the engine's lookup: at most
``num_tokens - 1`` tokens, rounded down to the cache-hit alignment
(`bounded`). Nothing here imports vLLM or starts a process.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from harness.contract.records import (
    OpRecord,
    ProbeRecord,
    ProbeSetup,
    Record,
    RunStart,
)
from harness.contract.wire import ExternalBlockHash, decode_event
from harness.routers.fidelity import Tally, layout_of, verdict
from harness.routers.router import EngineLayout, RouterIndex, predict


class Router(Protocol):
    """What the loop asks of a router (module docstring)."""

    def publish(self, events: list[bytes]) -> None:
        """One batch: the events of one engine step, each as vLLM encoded it."""

    def settle(self) -> None:
        """Return once everything published has been applied."""

    def predict(
        self, token_ids: list[int], block_hashes: Sequence[ExternalBlockHash]
    ) -> int:
        """Tokens of this request the router credits the engine with."""

    def ledger(self) -> Counter:
        """The router's own counts of what it used and dropped of the stream,
        by its own names for them ("relay filtered stored
        non_main_attention_kind", ...)."""


@dataclass(frozen=True)
class Answer:
    """One probe at one quiet point: the engine's hit, the router's."""

    op: int
    origin: str
    num_tokens: int
    truth: int
    raw: int  # what the router answered
    predicted: int  # `bounded`

    @property
    def verdict(self) -> str:
        return verdict(self.predicted, self.truth)

    @classmethod
    def of(cls, op, origin, num_tokens, truth, raw, alignment) -> Answer:
        """The router's ``raw`` answer beside the engine's ``truth``,
        `bounded` at ``alignment``."""
        predicted = bounded(raw, num_tokens, alignment)
        return cls(op, origin, num_tokens, truth, raw, predicted)


@dataclass
class RouterRun:
    """One workload run through one router."""

    config: str
    seed: int
    # What was published: batches (one per engine step) and their events.
    batches: int = 0
    events: int = 0
    answers: list[Answer] = field(default_factory=list)
    ledger: Counter = field(default_factory=Counter)

    def tally(self) -> Tally:
        return Tally.of((answer.predicted, answer.truth) for answer in self.answers)


def bounded(raw: int, num_tokens: int, alignment: int) -> int:
    """A router's answer as a hit the engine could serve: at most
    ``num_tokens - 1`` tokens (the lookup never covers the whole prompt),
    rounded down to the cache-hit alignment."""
    cap = (num_tokens - 1) // alignment * alignment
    return max(0, min(raw, cap))


def run_layout(records: Sequence[Record]) -> tuple[RunStart, ProbeSetup]:
    start = records[0]
    if not isinstance(start, RunStart):
        raise ValueError("a workload run starts with its RunStart")
    setup = next((r for r in records if isinstance(r, ProbeSetup)), None)
    if setup is None:
        raise ValueError(f"{start.config} seed {start.seed}: recorded without probes")
    return start, setup


def measure(records: Sequence[Record], router: Router) -> RouterRun:
    """Replay a run recorded with probes into ``router``; its answer to every
    probe beside the engine's hit, and its ledger at the end."""
    start, setup = run_layout(records)
    run = RouterRun(start.config, start.seed)
    for record in records:
        if isinstance(record, OpRecord) and record.events:
            router.publish([event.data for event in record.events])
            run.batches += 1
            run.events += len(record.events)
        elif isinstance(record, ProbeRecord) and record.probes:
            router.settle()
            for probe in record.probes:
                raw = router.predict(probe.token_ids, probe.block_hashes)
                tokens = len(probe.token_ids)
                run.answers.append(
                    Answer.of(
                        record.op, probe.origin, tokens, probe.hit, raw, setup.alignment
                    )
                )
    router.settle()
    run.ledger = router.ledger()
    return run


class IndexRouter:
    """harness.routers.router as a `Router`: the index a router builds
    from the events alone, predicted with vLLM's own rules (combined)."""

    def __init__(self, layout: EngineLayout, refuse_orphans: bool):
        self.layout = layout
        self.index = RouterIndex(refuse_orphans=refuse_orphans)
        self.stored = 0

    def publish(self, events: list[bytes]) -> None:
        for data in events:
            event = decode_event(data)
            self.index.apply(event)
            self.stored += type(event).__name__ == "BlockStored"

    def settle(self) -> None:
        """Applied as published."""

    def predict(self, token_ids, block_hashes) -> int:
        holding = self.index.holding(self.layout.medium)
        return predict(self.layout, holding, block_hashes, len(token_ids)).combined

    def ledger(self) -> Counter:
        indexed = self.stored - self.index.refused
        ledger = Counter({"stores indexed": indexed})
        if self.index.refuse_orphans:
            ledger["stores refused: parent not indexed"] = self.index.refused
        else:
            ledger["stores indexed under a parent not indexed"] = self.index.orphans
        return ledger


class HashSetRouter(IndexRouter):
    """The hash-set router, vLLM's rules: the multiset of announced hashes
    per ``(medium, group_idx)``, no parent or span check; a request's chain
    hashes looked up per group kind and composed as vLLM's hybrid
    coordinator does. What a router that keeps announced hashes does
    (vllm-router's keying, Dynamo's hybrid prototype)."""

    def __init__(self, layout: EngineLayout):
        super().__init__(layout, refuse_orphans=False)


class ContentTreeRouter(IndexRouter):
    """The content tree, parent-refusing: the same index and rules, but a
    store whose parent it does not hold is refused, as a tree keyed by
    block content must (Dynamo's radix tree, vllm-router's anchors)."""

    def __init__(self, layout: EngineLayout):
        super().__init__(layout, refuse_orphans=True)


def hash_set_router(records: Sequence[Record]) -> HashSetRouter:
    return HashSetRouter(layout_of(*run_layout(records)))


def content_tree_router(records: Sequence[Record]) -> ContentTreeRouter:
    return ContentTreeRouter(layout_of(*run_layout(records)))


def merged_ledger(runs: Iterable[RouterRun]) -> Counter:
    total = Counter()
    for run in runs:
        total.update(run.ledger)
    return total
