"""A real engine's stream as the harness hears it, and the gate it waits at.

`EngineStream` is a subscriber to an engine that binds its publisher
(``tcp://*:PORT``, harness.engine.engine): the harness's own, which says
when the stream is quiet and which batch the engine published last
(harness.engine.engine_routers); and a consumer's shim's
(harness.engine.shims), which feeds what it heard to an index router, or is
the stream source a real router settles on (harness.routers.dynamo_relay,
vllm_router: what it has heard is what the router subscribed beside it
should have heard), as harness.routers.publisher's `StreamPublisher` is for
a replay. `Gate` is the other end of harness.engine.engine.request_gate.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import msgspec

from harness.contract.subscribe import SequenceCheck, count_events
from harness.errors import SubscriptionError, require

# How long the harness's subscriber must hear nothing to call the stream
# quiet: at a gate, before the routers are asked; after the engine's exit,
# before the session ends.
QUIET_S = 0.3
POLL_MS = 50


class EngineStream:
    """The harness's subscriber to a real engine's publisher and what it has
    heard: a router adapter's stream source, as harness.routers.publisher's
    `StreamPublisher` is, but one nobody can send into (`injects`)."""

    injects = False
    # The engine's PUB socket tells no one of its subscribers.
    subscriptions = 0

    def __init__(self, endpoint: str, topic: str = ""):
        zmq = require("zmq", "capture")
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.SUB)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.SUBSCRIBE, topic.encode())
        self.endpoint = endpoint  # every subscriber connects
        self.socket.connect(self.endpoint)
        self.payloads: list[bytes] = []
        self.batch_events: list[int] = []
        self.events = 0
        self.sequence_check = SequenceCheck()
        self.heard = time.monotonic()

    @classmethod
    def on_port(cls, port: int) -> EngineStream:
        """The subscriber to an engine that will bind ``engine_endpoint``,
        ``tcp://*:PORT``, on this host."""
        stream = cls(f"tcp://127.0.0.1:{port}")
        stream.engine_endpoint = f"tcp://*:{port}"
        return stream

    @property
    def last_seq(self) -> int:
        """The sequence number of the last batch heard; -1 before any."""
        return self.sequence_check.expected - 1

    @property
    def sequence(self) -> int:
        """Batches heard (the engine's next sequence number, gaps aside)."""
        return len(self.payloads)

    def wait_for_subscribers(self, count: int) -> None:
        """Nothing to wait for, or to wait with: the engine's PUB socket
        tells no one who subscribed. The routers subscribe at the first gate
        (harness.engine.engine_routers.JOIN_S), before the engine has
        published anything; a router that missed a batch does not settle
        (`SubscriptionError`); a gap in the harness's own numbers is in
        `sequence_check`."""

    def take(self, wait_ms: int = 0) -> None:
        """Every message that has arrived, waiting up to ``wait_ms`` for one."""
        while self.socket.poll(wait_ms):
            wait_ms = 0
            frames = self.socket.recv_multipart()
            if len(frames) != 3:
                continue
            self.sequence_check.see(int.from_bytes(frames[1], "big"))
            count = count_events(frames[2]) or 0
            self.payloads.append(frames[2])
            self.batch_events.append(count)
            self.events += count
            self.heard = time.monotonic()

    def wait_quiet(self, deadline: float) -> None:
        """Take messages until none has come for QUIET_S, counted from now
        at the earliest: at a gate, the engine's last batch may still be on
        its way (vLLM's publisher thread sends it while the request's output
        returns), and the step before it may be longer ago than QUIET_S
        (a step on two busy cores took that long)."""
        self.heard = max(self.heard, time.monotonic())
        while time.monotonic() - self.heard < QUIET_S:
            if time.monotonic() > deadline:
                raise SubscriptionError(
                    f"{self.endpoint}: the engine's stream did not go quiet"
                )
            self.take(POLL_MS)

    def close(self) -> None:
        self.socket.close()
        self.context.term()


class AtGate(NamedTuple):
    """What the engine sends at its gate (harness.engine.engine.request_gate):
    a request, its tokens and the hashes the engine computed for them; or,
    once before the first, phase "hello" with what the engine says of how
    it keys prompts in ``info``."""

    number: int
    phase: str
    tokens: list[int]
    hashes: list = []
    info: dict = {}


class Gate:
    """The REP side of harness.engine.engine.request_gate, on the loopback."""

    def __init__(self):
        zmq = require("zmq", "capture")
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.REP)
        self.socket.setsockopt(zmq.LINGER, 0)
        port = self.socket.bind_to_random_port("tcp://127.0.0.1")
        self.endpoint = f"tcp://127.0.0.1:{port}"

    def asked(self) -> AtGate | None:
        """The request waiting at the gate, if one is."""
        if not self.socket.poll(0):
            return None
        return AtGate(*msgspec.msgpack.decode(self.socket.recv()))

    def go(self) -> None:
        self.socket.send(b"go")

    def close(self) -> None:
        self.socket.close()
        self.context.term()
