"""The consumers the harness measures, each a router of the router protocol.

``python -m harness shim NAME [--block-size N]`` answers the router
protocol (harness.routers.protocol, docs/router-protocol.md) on its stdin
and stdout, as any router scored by ``python -m harness score`` does:

- ``hash-set`` and ``content-tree``: harness.routers.loop's index routers
  (every announced hash; the same, refusing a store under a parent it does
  not hold), predicted with vLLM's rules for the greeting's layout, from the
  engine's own hashes in each ask;
- ``llm-d-model``: the model of llm-d's rules (harness.routers.llmd_model),
  re-hashing tokens at its block size;
- ``dynamo``: NVIDIA Dynamo 1.6.1's relay, event plane and indexer
  (harness.routers.dynamo_relay), subscribed to the engine itself; in a
  process of its own, as its counters are process-wide;
- ``vllm-router``: vllm-router 0.1.17's kv_aware policy, its own process
  (harness.routers.vllm_router), subscribed to the engine itself.

Each shim also subscribes to the engine (an `EngineStream`): the index
routers and the llm-d model are fed what it hears; for Dynamo and
vllm-router it counts what the engine published, which they settle on (every
event received by Dynamo's relay, every batch accounted for in
vllm-router's log). An ask is answered once that subscriber has heard the
batch ``after_seq`` and the router has settled: ``seen_seq`` is that batch.
The bye's counts are the router's own (its `ledger`). The replies go to a
private copy of stdout; stdout itself points at stderr, so that what the
routers' libraries print cannot corrupt the protocol.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter

import msgspec

from harness.contract.wire import decode_batch
from harness.engine.engine_stream import POLL_MS, EngineStream
from harness.errors import SubscriptionError
from harness.routers import CONSUMER_NAMES, protocol
from harness.routers.loop import ContentTreeRouter, HashSetRouter
from harness.routers.protocol import Greeting

# The shims with a router block size to choose (--block-size; the greeting's
# cache block size when not given).
BLOCK_SIZED = ("llm-d-model", "dynamo", "vllm-router")
# The routers fed the events by the shim (the others subscribe themselves).
FED = ("hash-set", "content-tree", "llm-d-model")
# How long a shim waits to hear the batch an ask names: within the harness's
# bound on the answer, with time left to settle the router.
CATCH_UP_S = protocol.ANSWER_S / 2
_encoder = msgspec.msgpack.Encoder()


def make_router(name: str, greeting: Greeting, block_size: int, stream):
    """The `Router` (harness.routers.loop) a shim answers for."""
    layout = greeting.layout()
    if name == "hash-set":
        return HashSetRouter(layout)
    if name == "content-tree":
        return ContentTreeRouter(layout)
    if name == "llm-d-model":
        from harness.routers.llmd_model import LlmdModel

        return LlmdModel(layout, block_size)
    if name == "dynamo":
        from harness.routers.dynamo_relay import DynamoRelay

        return DynamoRelay(stream, block_size)
    if name == "vllm-router":
        from harness.routers.vllm_router import VllmRouter

        return VllmRouter(stream, block_size, hash_seed=greeting.hash_seed or "0")
    raise ValueError(f"no shim {name!r}; one of {', '.join(CONSUMER_NAMES)}")


def engine_hash(value):
    """A hash of an ask as the events carry it: bytes from hex."""
    return bytes.fromhex(value) if isinstance(value, str) else value


class Shim:
    """One router behind the protocol (module docstring)."""

    def __init__(self, name: str, block_size: int | None, greeting: Greeting):
        self.name = name
        sized = name in BLOCK_SIZED
        self.block_size = (block_size or greeting.block_size) if sized else None
        self.stream = EngineStream(greeting.endpoint, greeting.topic)
        self.fed = 0  # batches given to a FED router
        try:
            self.router = make_router(name, greeting, self.block_size, self.stream)
        except BaseException:
            self.stream.close()
            raise

    def ready(self) -> dict:
        reply = {"type": "ready", "protocol": protocol.VERSION, "name": self.name}
        if self.block_size:
            reply["block_size"] = self.block_size
        return reply

    def answer(self, ask: dict) -> dict:
        self.catch_up(ask["after_seq"])
        self.router.settle()
        hashes = [engine_hash(value) for value in ask["block_hashes"]]
        hit = self.router.predict(ask["token_ids"], hashes)
        seen = self.stream.last_seq
        return {"type": "answer", "id": ask["id"], "seen_seq": seen, "hit_tokens": hit}

    def catch_up(self, after_seq: int) -> None:
        """Hear every batch up to ``after_seq``; feed a FED router."""
        deadline = time.monotonic() + CATCH_UP_S
        while self.stream.last_seq < after_seq:
            if time.monotonic() > deadline:
                raise SubscriptionError(
                    f"{self.stream.endpoint}: heard up to batch "
                    f"{self.stream.last_seq} of {after_seq} in {CATCH_UP_S:g} s"
                )
            self.stream.take(POLL_MS)
        if (gap := self.stream.sequence_check.incomplete()) is not None:
            raise SubscriptionError(f"{self.stream.endpoint}: {gap}")
        if self.name in FED:
            for index in range(self.fed, self.stream.sequence):
                batch = decode_batch(self.stream.payloads[index], f"batch {index}")
                self.router.publish([_encoder.encode(e) for e in batch.events])
            self.fed = self.stream.sequence

    def bye(self, message: dict) -> dict:
        """The router's own counts, over every batch up to the bye's
        ``after_seq`` (the engine's last)."""
        self.catch_up(message.get("after_seq", -1))
        self.router.settle()
        return {"type": "bye", "counts": dict(+Counter(self.router.ledger()))}

    def close(self) -> None:
        try:
            if hasattr(self.router, "close"):
                self.router.close()
        finally:
            self.stream.close()


def serve(name: str, block_size: int | None) -> int:
    """Answer the protocol on stdin and stdout until ``bye`` or stdin's end."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    def say(message: dict) -> None:
        replies.write(json.dumps(message) + "\n")
        replies.flush()

    first = sys.stdin.readline()
    if not first:
        return 0
    shim = Shim(name, block_size, Greeting.from_json(json.loads(first)))
    try:
        say(shim.ready())
        for line in sys.stdin:
            message = json.loads(line)
            if message["type"] == "bye":
                say(shim.bye(message))
                break
            say(shim.answer(message))
    finally:
        shim.close()
    return 0
