"""Dynamo's pipeline in a process of its own: one per router block size.

Dynamo 1.6.1's counters are process-wide (harness.routers.dynamo_relay):
two relays of one process, running at once, add up in each other's ledger
and settle. The replays run one relay at a time; a real engine's session
subscribes a relay per router block size at once, so each runs in a child
(``python -m harness e2e dynamo-relay``, internal) that answers the
JSON-lines protocol of harness.workloads.worker: ``settle`` (with the number of
events the engine has published), ``predict`` (a request's token ids) and
``ledger``. `DynamoProcess` is the `Router` over such a child.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

from harness.workloads.worker import TreeWorker, serve

COMMAND = ["-m", "harness", "e2e", "dynamo-relay"]


class ChildSource:
    """In the child: the engine's publisher as the relay's stream source;
    the parent says at each settle how many events it has published."""

    injects = False
    subscriptions = 0
    sequence = 0

    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        self.events = 0

    def wait_for_subscribers(self, count: int) -> None:
        """As harness.engine.engine_stream.EngineStream's."""


def serve_relay(endpoint: str, block_size: int) -> int:
    """In the child: a `DynamoRelay` on ``endpoint``, answering requests on
    stdin until it closes."""
    from harness.routers.dynamo_relay import DynamoRelay

    source = ChildSource(endpoint)
    relay = DynamoRelay(source, block_size)

    def handle(request: dict) -> dict:
        if request["op"] == "settle":
            source.events = request["events"]
            relay.settle()
            return {}
        if request["op"] == "predict":
            return {"raw": relay.predict(request["tokens"], [])}
        if request["op"] == "ledger":
            return {"ledger": dict(relay.ledger())}
        raise ValueError(f"unknown request {request['op']!r}")

    try:
        return serve(handle)
    finally:
        relay.close()


class DynamoProcess:
    """`Router` (harness.routers.loop) over a child's `DynamoRelay` at
    router block size ``block_size``, subscribed to ``source.endpoint``."""

    def __init__(self, source, block_size: int):
        self.source = source
        self.block_size = block_size
        self.scratch = tempfile.TemporaryDirectory(prefix="harness-dynamo-")
        command = [*COMMAND, "--endpoint", source.endpoint]
        command += ["--block-size", str(block_size)]
        log = Path(self.scratch.name) / "dynamo.log"
        self.worker = TreeWorker(None, command, log)

    def publish(self, events: list[bytes]) -> None:
        raise NotImplementedError("the engine publishes; nothing is replayed")

    def settle(self) -> None:
        self.worker.ask({"op": "settle", "events": self.source.events})

    def predict(self, token_ids, block_hashes) -> int:
        return self.worker.ask({"op": "predict", "tokens": token_ids})["raw"]

    def ledger(self) -> Counter:
        return Counter(self.worker.ask({"op": "ledger"})["ledger"])

    def close(self) -> None:
        try:
            self.worker.close()
        finally:
            self.scratch.cleanup()
