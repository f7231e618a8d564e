"""Routers subscribed to a real engine, each asked before every request: what
``python -m harness score`` and ``e2e routers`` measure.

The engine session of harness.engine.engine (``python -m harness e2e engine
--gate``) binds its publisher, ``tcp://*:PORT``, and waits at its gate
(harness.engine.engine.request_gate) before each request. Once, before the
first, it says how it keys prompts (phase "hello"): the harness starts every
router (a `RouterSpec`: a user's ``--router-cmd``, or a consumer's shim of
harness.engine.shims, once per router block size an operator would choose)
as a child speaking the router protocol (harness.routers.router_child),
greets them all (harness.routers.protocol's `Greeting`) and lets the engine
go JOIN_S after the last said ready. At each request the harness waits until
its own subscriber (harness.engine.engine_stream's `EngineStream`) has heard
nothing for a while (engine_stream.QUIET_S), asks every router for the
request's hit, ``after_seq`` the last batch heard, and lets the engine go; a
router answers once it has applied that batch, so no answer is a race. What
the engine served, ``num_cached_tokens``, comes from the session's request
log (harness.contract.records.ServedRequest); harness.routers.loop's
`Answer` pairs the two, capped as the engine caps a hit. A router that breaks
the protocol is ended and its error kept (`RoutersSession.errors`); the
others go on.

`routers_end_to_end` runs sessions as released and with tiers installed
(harness.engine.e2e.each_tier); `session_table` is a
harness.routers.real_routers `RoutersTable` whose one config is the engine
session.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from harness import scratch
from harness.contract.records import ServedRequest
from harness.engine.engine import BLOCK_SIZE, HASH_BLOCK_SIZE
from harness.engine.engine_stream import POLL_MS, EngineStream, Gate
from harness.engine.session import (
    SESSION_BUDGET_S,
    EngineProcess,
    engine_command,
    free_port,
    served_requests,
)
from harness.errors import RouterProtocolError
from harness.log import progress
from harness.routers.loop import Answer, RouterRun
from harness.routers.protocol import Greeting, Group, hash_json
from harness.routers.router_child import RouterChild

CONFIG = "e2e engine"
# The router block sizes an operator would choose for the e2e engine.
BLOCK_SIZES = {HASH_BLOCK_SIZE: "hash", BLOCK_SIZE: "cache"}
# The shims with a block size to choose (harness.engine.shims.BLOCK_SIZED).
BLOCK_SIZED = ("llm-d-model", "dynamo", "vllm-router")
# How long after the last router's ready the engine may publish: a router
# says it is ready once it has connected, and ZMQ delivers to a SUB socket
# only once its subscription has reached the publisher (Dynamo 1.6.1's relay,
# connected to an endpoint nobody listened on yet, missed all but the last of
# an engine's first four batches).
JOIN_S = 1.0
# The events' topic: vLLM's default, none. vllm-router 0.1.17 reads a
# --kv-event-source's messages only under that topic (the CLI sets no
# other); under the e2e session's "kv" it ignores every one, silently.
TOPIC = ""

Key = tuple[str, int]  # (router, router block size; 0: none to choose)


@dataclass(frozen=True)
class RouterSpec:
    """A router to start: how the tables name it, its command line and the
    block size it runs at (0 where it has none to choose, or says it in its
    ready)."""

    label: str
    command: tuple[str, ...]
    block_size: int = 0


def shim_spec(name: str, block_size: int = 0) -> RouterSpec:
    command = (sys.executable, "-m", "harness", "shim", name)
    if block_size:
        command += ("--block-size", str(block_size))
    return RouterSpec(name, command, block_size)


def builtin_routers(names: Iterable[str]) -> list[RouterSpec]:
    """Each consumer's shim, at each of BLOCK_SIZES where it has a block size."""
    return [
        shim_spec(name, size)
        for name in names
        for size in (BLOCK_SIZES if name in BLOCK_SIZED else (0,))
    ]


def command_routers(commands: Iterable[list[str]]) -> list[RouterSpec]:
    """The users' routers, ``router N`` until their ready names them."""
    return [
        RouterSpec(f"router {n}", tuple(command))
        for n, command in enumerate(commands, 1)
    ]


@dataclass
class Asked:
    """One request at its gate: what the routers answered, and the batches
    the harness's subscriber had heard then."""

    number: int
    phase: str
    tokens: list[int]
    batches: int
    raw: dict[Key, int]
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
    greeting: Greeting | None = None
    # (router, block size) -> its run, for each router that kept the protocol
    runs: dict[Key, RouterRun] = field(default_factory=dict)
    errors: dict[Key, RouterProtocolError] = field(default_factory=dict)


class Routers:
    """One session's router children, by key once each is ready; every
    child started is ended by `close`."""

    def __init__(self, specs: list[RouterSpec], folder: Path):
        self.specs = specs
        self.folder = folder
        self.started: list[RouterChild] = []
        self.children: dict[Key, RouterChild] = {}
        self.errors: dict[Key, RouterProtocolError] = {}
        self.counts: dict[Key, dict] = {}

    def start(self, greeting: Greeting) -> None:
        """Start and greet every router, then take their readies."""
        greeted = []
        sizes = (0, greeting.hash_block_size, greeting.block_size)
        for number, spec in enumerate(self.specs, 1):
            if spec.block_size not in sizes:  # no hash block of that size
                continue
            log = self.folder / f"router-{number}.log"
            child = RouterChild(list(spec.command), log, spec.label)
            self.started.append(child)
            key = (spec.label, spec.block_size)
            if self._kept(key, child.greet, greeting)[0]:
                greeted.append((key, child))
        for key, child in greeted:
            kept, ready = self._kept(key, child.ready)
            if kept:
                key = (child.label, key[1] or ready.block_size or 0)
                while key in self.children or key in self.errors:
                    key = (f"{key[0]}'", key[1])
                self.children[key] = child
        time.sleep(JOIN_S)

    def _kept(self, key: Key, exchange, *args) -> tuple[bool, object]:
        """(True, ``exchange(*args)``), or (False, None) where the router
        broke the protocol: it was ended, and its error is kept."""
        try:
            return True, exchange(*args)
        except RouterProtocolError as exc:
            self.errors[key] = exc
            self.children.pop(key, None)
            progress(f"score: {exc}")
            return False, None

    def ask(self, number: int, after_seq: int, tokens, hashes) -> dict[Key, int]:
        """Every router's answer: all asked first, then each answer taken."""
        asking = {
            key: child
            for key, child in list(self.children.items())
            if self._kept(key, child.send_ask, number, after_seq, tokens, hashes)[0]
        }
        raw = {}
        for key, child in asking.items():
            kept, answer = self._kept(key, child.answer)
            if kept:
                raw[key] = answer.hit_tokens
        return raw

    def bye(self, after_seq: int) -> None:
        """Each router's counts, once it has applied every batch up to
        ``after_seq``; all told bye first."""
        saying = {
            key: child
            for key, child in list(self.children.items())
            if self._kept(key, child.send_bye, after_seq)[0]
        }
        for key, child in saying.items():
            kept, counts = self._kept(key, child.bye_counts)
            if kept:
                self.counts[key] = counts

    def close(self) -> None:
        with ExitStack() as stack:  # every one, whatever another raises
            for child in self.started:
                stack.callback(child.close)


def greeting_of(info: dict, stream: EngineStream, replay: str | None) -> Greeting:
    """The routers' greeting from what the engine said at its gate."""
    unit = info.get("hash_block_size", HASH_BLOCK_SIZE)
    return Greeting(
        endpoint=stream.endpoint, replay_endpoint=replay, topic=TOPIC,
        block_size=BLOCK_SIZE, hash_block_size=unit, alignment=unit,
        hash_algorithm=info["hash_algorithm"],
        none_hash=hash_json(info["none_hash"]), hash_seed=info["hash_seed"],
        groups=tuple(
            Group(g["group_idx"], g["kind"], g["block_size"]) for g in info["groups"]
        ),
        engine=info.get("engine", ""),
    )  # fmt: skip


def routers_session(
    label: str,
    model: Path,
    dtype: str,
    seed: int,
    specs: list[RouterSpec],
    budget_s: float = SESSION_BUDGET_S,
) -> RoutersSession:
    """One gated engine session with the routers of ``specs`` subscribed;
    the engine's process group is killed at the end, every router ended."""
    stream = EngineStream.on_port(free_port())
    gate = Gate()
    try:
        folder = Path(tempfile.gettempdir())
        with scratch.directory(folder, "routers") as work:
            routers = Routers(specs, work)
            try:
                session = _gated_session(
                    label, model, dtype, seed, (stream, gate, routers), budget_s, work
                )
                stream.take()
                routers.bye(stream.last_seq)
            finally:
                routers.close()
    finally:
        gate.close()
        stream.close()
    session.errors = routers.errors
    for key, counts in routers.counts.items():
        session.runs[key] = router_run(session, key, counts)
    return session


def _gated_session(label, model, dtype, seed, parts, budget_s, work):
    stream, gate, routers = parts
    requests = work / "requests.rec"
    replay = f"tcp://127.0.0.1:{free_port()}"
    command = engine_command(
        model, stream.engine_endpoint, dtype, seed, requests, replay
    )
    command += ["--gate", gate.endpoint, "--topic", TOPIC]
    started = time.monotonic()
    deadline = started + budget_s
    asked: list[Asked] = []
    greeting = None
    with EngineProcess(command, work / "engine.log") as engine:
        pid = engine.process.pid
        progress(f"score: {label} engine session started (pid {pid})")
        while time.monotonic() < deadline:
            stream.take(POLL_MS)
            if (at := gate.asked()) is not None:
                if at.phase == "hello":
                    greeting = greeting_of(at.info, stream, replay)
                    routers.start(greeting)
                else:
                    asked.append(ask_routers(at, stream, routers, deadline))
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
        greeting=greeting,
    )


def ask_routers(at, stream: EngineStream, routers: Routers, deadline) -> Asked:
    """At a gate: once the stream is quiet, each router's answer for the
    request, after the last batch heard."""
    stream.wait_quiet(deadline)
    held = stream.sequence
    raw = routers.ask(at.number, stream.last_seq, at.tokens, at.hashes)
    stream.take()
    return Asked(at.number, at.phase, at.tokens, held, raw, stream.sequence - held)


def answers(session: RoutersSession, key: Key) -> list[Answer]:
    """Each request asked at the gate beside what the engine served it,
    capped at the engine's alignment."""
    greeting = session.greeting
    alignment = greeting.alignment if greeting is not None else HASH_BLOCK_SIZE
    return [
        Answer.of(
            asked.number,
            asked.phase,
            len(asked.tokens),
            served.num_cached_tokens,
            asked.raw[key],
            alignment,
        )
        for asked, served in zip(session.asked, session.served, strict=False)
    ]


def router_run(session: RoutersSession, key: Key, ledger) -> RouterRun:
    run = RouterRun(CONFIG, 0, session.stream.sequence, session.stream.events)
    run.answers = answers(session, key)
    run.ledger = ledger
    return run
