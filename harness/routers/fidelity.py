"""Router fidelity: how well a router that indexes the stream predicts the
hits the engine really serves.

A workload run with probes (harness.workloads.probes) records, at each quiet
point, requests looked up in the engine's own cache. `replay_probes` replays
the run's events into a `RouterIndex` and, at each quiet point, sets the
router's prediction for every probe (harness.routers.router) beside the
engine's hit: combined (every group together) and per group. It also applies
the same rules to the pool's own snapshot of that quiet point (`mirrored`),
which must give the engine's hit exactly: the rules are vLLM's lookup, and
the snapshot is what the lookup reads.

A prediction is exact, over (the router sends a request to a worker for a
hit the engine does not serve: the tokens are recomputed) or under (the
router misses a hit the engine would have served). `Tally` counts them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from harness.contract.records import (
    OpRecord,
    PoolSnapshot,
    ProbeRecord,
    ProbeSetup,
    Record,
    RunStart,
)
from harness.contract.wire import ExternalBlockHash, decode_event
from harness.routers.router import (
    EngineLayout,
    GroupLayout,
    Prediction,
    RouterIndex,
    hash_sets,
    predict,
    view_key,
)

EXACT, OVER, UNDER = "exact", "over", "under"


def verdict(predicted: int, truth: int) -> str:
    if predicted == truth:
        return EXACT
    return OVER if predicted > truth else UNDER


@dataclass
class Tally:
    """Predictions against the engine's hits, over many requests."""

    probes: int = 0
    hits: int = 0  # requests the engine serves some cached tokens
    exact: int = 0
    over: int = 0
    over_tokens: int = 0
    under: int = 0
    under_tokens: int = 0

    def add(self, predicted: int, truth: int) -> None:
        self.probes += 1
        self.hits += truth > 0
        found = verdict(predicted, truth)
        if found == EXACT:
            self.exact += 1
        elif found == OVER:
            self.over += 1
            self.over_tokens += predicted - truth
        else:
            self.under += 1
            self.under_tokens += truth - predicted

    @classmethod
    def of(cls, pairs: Iterable[tuple[int, int]]) -> Tally:
        """The tally of (predicted, truth) pairs."""
        tally = cls()
        for predicted, truth in pairs:
            tally.add(predicted, truth)
        return tally

    def merge(self, other: Tally) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def mispredicted_tokens(self) -> int:
        return self.over_tokens + self.under_tokens

    @property
    def exact_pct(self) -> float:
        return 100 * self.exact / self.probes if self.probes else 0.0

    @staticmethod
    def _mean(tokens: int, count: int) -> float:
        return tokens / count if count else 0.0

    def cells(self) -> list[str]:
        """probes, engine hits, exact %, over n (mean tokens), under n (mean)."""
        return [
            str(self.probes),
            str(self.hits),
            f"{self.exact_pct:.1f}",
            f"{self.over} ({self._mean(self.over_tokens, self.over):.0f})",
            f"{self.under} ({self._mean(self.under_tokens, self.under):.0f})",
        ]


CELL_HEADERS = ["probes", "engine hits", "exact %", "over (mean)", "under (mean)"]


@dataclass(frozen=True)
class ProbeOutcome:
    """One probe at one quiet point: the engine's hit, the router's
    prediction and vLLM's rules over the pool's own snapshot."""

    op: int
    origin: str
    num_tokens: int
    block_hashes: list[ExternalBlockHash]
    truth: Prediction
    predicted: Prediction
    mirrored: Prediction
    # Per group: the probe's hashes, up to the predicted length, that the
    # router indexes and the pool does not hold.
    unheld: tuple[frozenset, ...]
    # Per group: the router refused a store in the group's view since the
    # last AllBlocksCleared (so its index may lack what the pool holds).
    refused: tuple[bool, ...]


def layout_of(start: RunStart, setup: ProbeSetup) -> EngineLayout:
    return EngineLayout(
        hash_block_size=start.hash_block_size,
        alignment=setup.alignment,
        groups=tuple(
            GroupLayout(kind, size, window)
            for kind, size, window in zip(
                start.group_kinds,
                start.block_sizes,
                setup.sliding_windows,
                strict=True,
            )
        ),
        medium=start.medium,
    )


@dataclass
class ProbeReplay:
    """A run's probes, replayed; `outcomes` in stream order."""

    start: RunStart
    layout: EngineLayout
    outcomes: list[ProbeOutcome] = field(default_factory=list)
    refused_stores: int = 0

    def tally(self, group: int | None = None) -> Tally:
        """Combined (``group`` None) or one group's predictions."""
        if group is None:
            return Tally.of(
                (o.predicted.combined, o.truth.combined) for o in self.outcomes
            )
        return Tally.of(
            (o.predicted.per_group[group], o.truth.per_group[group])
            for o in self.outcomes
        )


def unheld_hashes(
    index: RouterIndex,
    medium: str | None,
    pool: dict[int, set],
    block_hashes: list[ExternalBlockHash],
    layout: EngineLayout,
    predicted: Prediction,
) -> tuple[frozenset, ...]:
    found = []
    for group, length in enumerate(predicted.per_group):
        view = index.views.get(view_key(medium, group), {})
        held = pool.get(group, set())
        reach = block_hashes[: length // layout.hash_block_size]
        found.append(
            frozenset(h for h in reach if view.get(h, 0) > 0 and h not in held)
        )
    return tuple(found)


def replay_probes(records: list[Record]) -> ProbeReplay:
    """Replay a run recorded with probes (its ProbeSetup is required)."""
    start = records[0]
    assert isinstance(start, RunStart)
    setup = next((r for r in records if isinstance(r, ProbeSetup)), None)
    if setup is None:
        raise ValueError(f"{start.config} seed {start.seed}: recorded without probes")
    layout = layout_of(start, setup)
    replay = ProbeReplay(start, layout)
    index = RouterIndex()
    pool: dict[int, set] = {}
    for record in records:
        if isinstance(record, OpRecord):
            for event in record.events:
                index.apply(decode_event(event.data))
        elif isinstance(record, PoolSnapshot):
            pool = {group: set(hashes) for group, hashes in record.held.items()}
        elif isinstance(record, ProbeRecord):
            holding = index.holding(start.medium)
            refused = tuple(
                view_key(start.medium, group) in index.refused_views
                for group in range(len(layout.groups))
            )
            for probe in record.probes:
                num_tokens = len(probe.token_ids)
                predicted = predict(layout, holding, probe.block_hashes, num_tokens)
                replay.outcomes.append(
                    ProbeOutcome(
                        op=record.op,
                        origin=probe.origin,
                        num_tokens=num_tokens,
                        block_hashes=probe.block_hashes,
                        truth=Prediction(probe.hit, tuple(probe.hit_per_group)),
                        predicted=predicted,
                        mirrored=predict(
                            layout, hash_sets(pool), probe.block_hashes, num_tokens
                        ),
                        unheld=unheld_hashes(
                            index,
                            start.medium,
                            pool,
                            probe.block_hashes,
                            layout,
                            predicted,
                        ),
                        refused=refused,
                    )
                )
    replay.refused_stores = index.refused
    return replay
