"""NVIDIA Dynamo's own pipeline as a `Router`: relay, event plane, indexer.

The path a Dynamo deployment runs (ai-dynamo-runtime 1.6.1): a
`KvEventPublisher` in relay mode subscribes to the engine's ZMQ publisher
(here harness.routers.publisher replaying a recorded stream, or a real
vLLM engine's publisher, in a shim of harness.engine.shims), filters and
converts vLLM's events in its Rust ``zmq_wire`` code and publishes them on
the event plane (zmq, in-memory discovery); a `KvRouter` of the same
endpoint indexes them in its radix tree and answers ``get_overlap_scores``
(``device_blocks`` per worker, in blocks of the router's block size). The
1.6.1 wheel has no `KvIndexer` class; `KvRouter` holds the same indexer, and
its worker has to be registered (`register_model`, no model assets) for the
router to score it.

What Dynamo used and dropped is read from its own Prometheus counters (the
runtime's system server, ``DYN_SYSTEM_PORT``). They are process-wide (1.6.1
labels them all with the first namespace that made them), so each
`DynamoRelay`, one at a time on its own namespace, counts what they gained
since it started:

- ``kv_publisher_zmq_events_total{stage=received|accepted}``: the relay;
- ``kv_publisher_zmq_filtered_events_total{reason}``: events the relay
  dropped (``non_main_attention_kind``: a Mamba or sliding-window group;
  ``non_main_attention_group``, ``unlearned_group_idx``: a removal of such a
  group, by its learned or unknown ``group_idx``);
- ``kv_publisher_zmq_suspicious_events_total{reason=empty_store_blocks}``: a
  store forwarded with no block, every block dropped because its
  ``block_size`` is not the router's ("Block not published");
- ``kv_cache_events_applied{status}``: the indexer (``parent_block_not_found``:
  a store whose parent the tree does not hold, dropped whole).

The relay coalesces compatible events, so the indexer's count cannot say
when everything is applied; `settle` waits until the relay has received
every event published, then sends a sentinel through the pipeline where the
harness owns the publisher (a replay), or waits for the indexer's counters
to stay still where it does not (a real engine's publisher; its docstring).
The relay learns each group's kind from its stores and filters a removal,
which carries no kind, by what it learned of the removal's group; so the
sentinel is stored in a group of its own (`SENTINEL_GROUP`, one no model
has), and what the relay learns of the engine's groups is the stream's alone.

`register_model` wants a directory; no model asset is read from it. It is a
harness scratch directory (harness.scratch, `model_directory`), removed when
the process ends, or by the next run's sweep if the process was killed.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import inspect
import os
import random
import socket
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec

from harness import scratch
from harness.contract.wire import BlockRemoved, BlockStored
from harness.errors import SubscriptionError
from harness.routers import metrics
from harness.routers.dynamo import dynamo_core
from harness.routers.metrics import dynamo_ledger
from harness.routers.publisher import StreamPublisher

PREFIX = "dynamo_component_"
# The settle sentinel: a token id no workload or engine prompt uses, hashes
# far from vLLM's; the same hash and tokens each time (Dynamo keeps a node by
# its tokens, and a second hash for the same tokens is not removable).
SENTINEL_TOKEN = 1 << 30
SENTINEL_HASH = 0x5E27_1E00_0000_0000
# The sentinel's own group: a full-attention store there teaches the relay
# nothing of the groups the engine has (its group 0 may be Mamba).
SENTINEL_GROUP = 1 << 16
SENTINEL_LEDGER = (
    "relay received stored",
    "relay accepted stored",
    "relay received removed",
    "relay accepted removed",
    "indexer stored: ok",
    "indexer removed: ok",
)
_encoder = msgspec.msgpack.Encoder()
PLACES = ("dynamo_namespace", "dynamo_component", "worker_id", "router_id")
SETTLE_TIMEOUT_S = 20.0
POLL_S = 0.002
# With a real engine's publisher: how long the indexer's counters must stay
# unchanged, once the relay has received everything, to count as applied.
INDEXER_QUIET_S = 0.25
# How long `_prime` waits for a sentinel store before it sends another.
PRIME_RESEND_S = 0.5


def model_directory() -> str:
    """A scratch directory for `register_model`, removed when this process
    ends (a killed run's is swept by the next run that makes one)."""
    stack = contextlib.ExitStack()
    path = stack.enter_context(
        scratch.directory(Path(tempfile.gettempdir()), "dynamo-model")
    )
    atexit.register(stack.close)
    return str(path)


def sentinel_store(block_size: int) -> BlockStored:
    """The settle sentinel's store: one block of its own tokens, in its own
    full-attention group (`SENTINEL_GROUP`)."""
    return BlockStored(
        [SENTINEL_HASH], None, [SENTINEL_TOKEN] * block_size, block_size, None,
        "GPU", None, group_idx=SENTINEL_GROUP, kv_cache_spec_kind="full_attention",
    )  # fmt: skip


def sentinel_removal() -> BlockRemoved:
    return BlockRemoved([SENTINEL_HASH], "GPU", group_idx=SENTINEL_GROUP)


def free_port(low: int = 20000, high: int = 32767) -> int:
    """A loopback port free now, below 32768: Dynamo reads DYN_SYSTEM_PORT
    as a signed 16-bit integer."""
    for port in random.Random().sample(range(low, high), 200):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise SubscriptionError(f"no free loopback port in {low}-{high}")


class DynamoPlatform:
    """One DistributedRuntime per process (in-memory discovery, TCP request
    plane, zmq event plane) on an event loop of its own thread; every
    `DynamoRelay` is a namespace on it."""

    _shared: DynamoPlatform | None = None

    @classmethod
    def shared(cls) -> DynamoPlatform:
        if cls._shared is None:
            cls._shared = cls()
        return cls._shared

    def __init__(self):
        self.core = dynamo_core()
        port = free_port()
        # Read by the runtime when it starts: its /metrics server.
        os.environ["DYN_SYSTEM_PORT"] = str(port)
        self.metrics_url = f"http://127.0.0.1:{port}/metrics"
        self.model_dir = model_directory()
        self.namespaces = 0
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runtime = self.run(self._start)

    async def _start(self) -> Any:
        return self.core.DistributedRuntime(
            asyncio.get_running_loop(), "mem", "tcp", event_plane="zmq"
        )

    def run(self, make, timeout: float = 60.0) -> Any:
        """Await ``make()`` on the runtime's loop (Dynamo's awaitables must
        be made there) and return its result."""

        async def call():
            result = make()
            return await result if inspect.isawaitable(result) else result

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(timeout)

    def spawn(self, make) -> Any:
        """Start ``make()``'s awaitable on the runtime's loop; its future."""

        async def start():
            return asyncio.ensure_future(make())

        return asyncio.run_coroutine_threadsafe(start(), self.loop).result(60)

    def counters(self) -> Counter:
        """Every Dynamo sample, keyed by (name, labels) without the labels
        that name the runtime's parts (namespace, component, worker)."""
        found = Counter()
        for name, labels, value in metrics.samples(metrics.fetch(self.metrics_url)):
            if name.startswith(PREFIX):
                kept = tuple(
                    sorted((k, v) for k, v in labels.items() if k not in PLACES)
                )
                found[name.removeprefix(PREFIX), kept] += value
        return found


async def _answer(request, context=None):
    yield {"token_ids": [], "finish_reason": "stop"}


class DynamoRelay:
    """`Router` (harness.routers.loop) over a fresh relay, event plane
    and KvRouter with router block size ``block_size``, subscribed to
    ``source`` (a `StreamPublisher`, or harness.engine.engine_stream's
    `EngineStream`: a real engine's publisher)."""

    def __init__(self, source: StreamPublisher, block_size: int, platform=None):
        self.platform = platform or DynamoPlatform.shared()
        self.source = source
        self.block_size = block_size
        self.baseline = self.platform.counters()
        self.platform.namespaces += 1
        self.namespace = f"harness{self.platform.namespaces}"
        core = self.platform.core
        self.endpoint = self.platform.runtime.endpoint(
            f"{self.namespace}.worker.generate"
        )
        self.platform.run(
            lambda: core.register_model(
                core.ModelInput.Tokens,
                core.ModelType.Completions,
                self.endpoint,
                self.platform.model_dir,
                model_name=self.namespace,
                worker_type=core.WorkerType.Aggregated,
                kv_cache_block_size=block_size,
                skip_model_assets=True,
            )
        )
        self.serving = self.platform.spawn(
            lambda: self.endpoint.serve_endpoint(_answer)
        )
        self.worker_id = self.endpoint.connection_id()
        self.relay = self.platform.run(
            lambda: core.KvEventPublisher(
                self.endpoint,
                kv_block_size=block_size,
                zmq_endpoint=source.endpoint,
                zmq_topic="",
            )
        )
        self.router = self.platform.run(
            lambda: core.KvRouter(self.endpoint, block_size, core.KvRouterConfig())
        )
        source.wait_for_subscribers(source.subscriptions + 1)
        self.sentinels = 0
        self.sentinel_tokens = [SENTINEL_TOKEN] * block_size
        self._wait(
            lambda: self._ingress_active(self.gained()),
            "the router's event-plane subscription",
        )
        if source.injects:
            self._prime()
        # What the ledger and `received` count from: the stream's own events.
        self.baseline = self.platform.counters()
        self.sentinels = 0
        self.events_before = source.events

    def _prime(self) -> None:
        """Send the sentinel store until the router scores it, and its
        removal until it scores 0, each again every PRIME_RESEND_S. The
        router's subscription to the relay's event plane is live some time
        after Dynamo counts it activated: events published at once reach
        the relay and not the indexer (seen twice in about 50 relays, a
        store once and a removal once)."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        store = _encoder.encode(sentinel_store(self.block_size))
        removal = _encoder.encode(sentinel_removal())
        for event, scored in ((store, self.block_size), (removal, 0)):
            while not self._resent_until(event, scored):
                if time.monotonic() > deadline:
                    raise SubscriptionError(
                        f"Dynamo ({self.namespace}): its indexer did not apply "
                        f"a sentinel within {SETTLE_TIMEOUT_S:.0f} s"
                    )

    def _resent_until(self, event: bytes, scored: int) -> bool:
        """Send ``event``; whether the sentinel scores ``scored`` within
        PRIME_RESEND_S."""
        self.source.send([event])
        sent = time.monotonic()
        while time.monotonic() - sent < PRIME_RESEND_S:
            if self._scored(self.sentinel_tokens) == scored:
                return True
            time.sleep(POLL_S)
        return False

    def gained(self) -> list[tuple[str, dict[str, str], float]]:
        """Dynamo's samples, less their values when this relay started."""
        now = self.platform.counters()
        return [
            (name, dict(labels), value - self.baseline[name, labels])
            for (name, labels), value in now.items()
        ]

    def _ingress_active(self, found) -> bool:
        return (
            metrics.total(
                found, "router_kv_zmq_ingress_lifecycle_total", action="activated"
            )
            > 0
        )

    def _wait(self, done, what: str) -> None:
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while not done():
            if time.monotonic() > deadline:
                raise SubscriptionError(
                    f"Dynamo ({self.namespace}): {what} not done within "
                    f"{SETTLE_TIMEOUT_S:.0f} s; its counts: {dict(self.ledger())}"
                )
            time.sleep(POLL_S)

    def publish(self, events: list[bytes]) -> None:
        self.source.send(events)

    def received(self) -> int:
        """Events the relay has received since it was primed, the sentinels'
        included (the source counts them among those it published)."""
        found = self.gained()
        return metrics.total(found, "kv_publisher_zmq_events_total", stage="received")

    def settle(self) -> None:
        """Wait until the relay has received every event published; then,
        where the harness owns the publisher, `settle_on_sentinel`, else
        until the indexer's counters have stayed still for INDEXER_QUIET_S
        (the engine is idle at a quiet point, so they change only while the
        indexer applies what the relay passed on)."""
        published = self.source.events - self.events_before
        self._wait(
            lambda: self.received() >= published,
            f"the relay's receipt of {published} events",
        )
        if self.source.injects:
            self.settle_on_sentinel()
        else:
            self._wait_indexer_still()

    def _wait_indexer_still(self) -> None:
        last, since = None, time.monotonic()

        def still() -> bool:
            nonlocal last, since
            found = self.gained()
            counts = (
                metrics.total(found, "kv_cache_events_applied"),
                metrics.total(found, "router_kv_zmq_ingress_batches_total"),
            )
            if counts != last:
                last, since = counts, time.monotonic()
            return time.monotonic() - since >= INDEXER_QUIET_S

        self._wait(still, "the indexer's counters staying still")

    def settle_on_sentinel(self) -> None:
        """Publish a sentinel store (a block of its own, tokens no prompt has,
        its own group, the router's block size) and wait until the router
        scores it, then its removal and wait until it is gone: the relay and
        the indexer apply a worker's events in order, so everything before
        is applied. The sentinel's events are taken out of the ledger."""
        self.sentinels += 1
        block = self.sentinel_tokens
        self.source.send([_encoder.encode(sentinel_store(self.block_size))])
        self._wait(lambda: self._scored(block) == self.block_size, "a sentinel store")
        self._remove_sentinel()

    def _remove_sentinel(self) -> None:
        self.source.send([_encoder.encode(sentinel_removal())])
        self._wait(
            lambda: self._scored(self.sentinel_tokens) == 0, "a sentinel removal"
        )

    def _scored(self, token_ids) -> int:
        scores = self.platform.run(lambda: self.router.get_overlap_scores(token_ids))
        blocks = sum(
            row["device_blocks"]
            for row in scores["workers"]
            if row["worker_id"] == self.worker_id
        )
        return blocks * self.block_size

    def predict(self, token_ids, block_hashes) -> int:
        return self._scored(token_ids)

    def ledger(self) -> Counter:
        ledger = dynamo_ledger(self.gained())
        ledger.subtract({name: self.sentinels for name in SENTINEL_LEDGER})
        return +ledger

    def close(self) -> None:
        self.relay.shutdown()
        self.platform.loop.call_soon_threadsafe(self.serving.cancel)
