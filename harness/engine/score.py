"""What ``python -m harness score`` measures and prints: each router's
predicted hit against the engine's, per request and in total.

`score_end_to_end` runs harness.engine.engine_routers' session (the routers
asked before each request) on the installed engine as released and with
each tier asked for installed on it (harness.engine.e2e.each_tier). `Scored`
holds the sessions: `render` prints each session's requests (served, and
each router's prediction, capped as the engine caps a hit) and the totals
(exact, over and under, in requests and tokens); `as_json` is the same for
CI; `exact` says whether every router predicted every request exactly. A
router that broke the protocol has no score: its error is printed and kept
(`errors`), and the verb ends with its status (harness.errors.RouterProtocolError).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from harness.contract.wire import decode_batch
from harness.engine.engine_routers import (
    BLOCK_SIZES,
    CONFIG,
    RouterSpec,
    RoutersSession,
    routers_session,
)
from harness.engine.judge import engine_layout
from harness.engine.session import SESSION_BUDGET_S
from harness.errors import E2EError, RouterProtocolError
from harness.routers.real_routers import RoutersTable, matrix_cell

RELEASED = "released"


@dataclass
class Scored:
    """`score_end_to_end`'s outcome: the sessions by label ("released",
    then each tier or patch)."""

    target: str
    engine: str
    dtype: str
    seed: int
    sessions: dict[str, RoutersSession]
    wall_s: float
    model: str = "hybrid"

    def errors(self) -> list[tuple[str, RouterProtocolError]]:
        return [
            (label, error)
            for label, session in self.sessions.items()
            for error in session.errors.values()
        ]

    def exact(self) -> bool:
        """Every router that kept the protocol predicted every request."""
        return all(
            run.tally().exact == run.tally().probes
            for session in self.sessions.values()
            for run in session.runs.values()
        )

    def table(self) -> RoutersTable:
        engine = f"{self.engine}, {self.dtype}, the {self.model} model"
        return session_table(self.sessions, engine)

    def as_json(self) -> dict:
        return {
            "kind": "score",
            "target": self.target,
            "engine": self.engine,
            "dtype": self.dtype,
            "model": self.model,
            "seed": self.seed,
            "sessions": {
                label: session_json(session) for label, session in self.sessions.items()
            },
            "exact": self.exact(),
            "protocol_errors": len(self.errors()),
            "wall_seconds": round(self.wall_s, 1),
        }


def router_name(key: tuple[str, int]) -> str:
    name, size = key
    return f"{name} {size}" if size else name


def session_json(session: RoutersSession) -> dict:
    routers = {
        router_name(key): {**asdict(run.tally()), "counts": dict(run.ledger)}
        for key, run in session.runs.items()
    }
    requests = [
        {
            "id": asked.number,
            "phase": asked.phase,
            "tokens": len(asked.tokens),
            "served": served.num_cached_tokens,
            "predicted": {
                router_name(key): run.answers[index].predicted
                for key, run in session.runs.items()
            },
        }
        for index, (asked, served) in enumerate(
            zip(session.asked, session.served, strict=False)
        )
    ]
    return {
        "returncode": session.returncode,
        "batches": session.stream.sequence,
        "events": session.stream.events,
        "routers": routers,
        "requests": requests,
        "errors": {router_name(k): str(error) for k, error in session.errors.items()},
    }


def check_session(session: RoutersSession) -> None:
    """The session ran whole, and the groups the routers were told are the
    ones the engine's stores name."""
    if session.returncode != 0:
        raise E2EError(
            f"the {session.label} engine session ended with status "
            f"{session.returncode}:\n{session.log_tail}"
        )
    if session.greeting is None or not session.stream.payloads:
        return
    batches = [decode_batch(p, "the stream") for p in session.stream.payloads]
    stored = [group.kind for group in engine_layout(batches).groups]
    told = [group.kind for group in session.greeting.layout().groups]
    if stored != told[: len(stored)]:
        raise E2EError(
            f"the {session.label} session told the routers of groups {told}, "
            f"but the engine's stores name {stored}"
        )


def session_table(sessions: dict[str, RoutersSession], engine: str) -> RoutersTable:
    """The sessions as one table: the engine session is the config, each
    session's label the tree."""
    requests = max((len(s.asked) for s in sessions.values()), default=0)
    table = RoutersTable(1, requests, 1)
    table.caption = (
        f"Routers on a real engine ({engine}): each request asked of every "
        "router before the engine served it, against its num_cached_tokens; "
        "predictions capped at num_tokens - 1 and aligned as the engine's. "
        "over/under: requests (mean tokens)."
    )
    for label, session in sessions.items():
        for (name, size), run in session.runs.items():
            table.add(CONFIG, label, name, size, BLOCK_SIZES.get(size, ""), run)
    return table


def render_requests(session: RoutersSession) -> str:
    """One session's requests, what the engine served beside each router's
    prediction (capped); * where they differ."""
    keys = list(session.runs)
    names = [router_name(key) for key in keys]
    lines = [
        f"{session.label}: per request, engine hit and predictions",
        "",
        "| request | phase | tokens | engine hit | " + " | ".join(names) + " |",
        "| ---: | --- | ---: | ---: |" + " ---: |" * len(keys),
    ]
    columns = [session.runs[key].answers for key in keys]
    for row in zip(*columns, strict=True):
        first = row[0]
        cells = [str(first.op), first.origin, str(first.num_tokens), str(first.truth)]
        cells += [f"{a.predicted}" + ("" if a.verdict == "exact" else "*") for a in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_totals(scored: Scored) -> str:
    """Per router and session: exact requests of all, over (+tokens), under
    (-tokens); a router that broke the protocol, its error."""
    labels = list(scored.sessions)
    keys = list(dict.fromkeys(k for s in scored.sessions.values() for k in s.runs))
    keys += [k for s in scored.sessions.values() for k in s.errors if k not in keys]
    lines = [
        "| router | " + " | ".join(labels) + " |",
        "| --- |" + " ---: |" * len(labels),
    ]
    for key in keys:
        cells = []
        for session in scored.sessions.values():
            if key in session.runs:
                cells.append(matrix_cell(session.runs[key].tally()))
            else:
                cells.append(f"protocol error: {session.errors[key].problem}"
                             if key in session.errors else "-")  # fmt: skip
        lines.append(f"| {router_name(key)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render(scored: Scored) -> str:
    parts = [render_requests(s) for s in scored.sessions.values() if s.runs]
    parts.append(
        f"In total ({scored.engine}, {scored.dtype}, the {scored.model} model, "
        f"seed {scored.seed}): exact "
        "requests of all · over-predicted (+tokens) · under-predicted (-tokens)"
    )
    parts.append(render_totals(scored))
    parts += [f"{label}: {error}" for label, error in scored.errors()]
    return "\n\n".join(parts)


def released_label(label: str) -> str:
    """harness.engine.e2e.each_tier's "pristine" is the release as shipped."""
    return RELEASED if label == "pristine" else label


def score_end_to_end(
    target: str,
    dtype: str,
    specs: list[RouterSpec],
    seed: int = 0,
    tiers: Iterable[str] = (),
    released: bool = True,
    alone: bool = False,
    budget_s: float = SESSION_BUDGET_S,
    model: str = "hybrid",
) -> Scored:
    """A session with the routers of ``specs`` on the installed engine as
    released (``released``), then one with each of ``tiers`` installed, and
    with ``alone`` one per patch of the strict tier alone; each runs
    ``model`` (harness.engine.engine.MODELS)."""
    from harness.engine.e2e import each_tier

    started = time.monotonic()
    runs = each_tier(
        target,
        dtype,
        lambda label, model, dtype: routers_session(
            released_label(label), model, dtype, seed, specs, budget_s
        ),
        alone=alone,
        tiers=tuple(tiers),
        released=released,
        model_kind=model,
    )
    sessions = {session.label: session for session in runs.results.values()}
    for session in sessions.values():
        check_session(session)
    wall_s = time.monotonic() - started
    return Scored(target, runs.engine, runs.dtype, seed, sessions, wall_s, model)
