"""A local ZMQ publisher that replays a recorded stream as vLLM sends it.

vLLM's ZmqEventPublisher sends each batch as a multipart message ``(topic,
8-byte big-endian sequence number, payload)``, sequence numbers from 0 up by
one, the payload a msgpack ``KVEventBatch`` array ``[ts, [event, ...], rank]``.
`StreamPublisher` sends the same bytes: each event exactly as the engine's
encoder wrote it (a workload's ``EventRecord.data``), framed in a batch.

It binds an XPUB socket on the loopback: to a subscriber that is a PUB
socket, and the publisher learns each subscription as it is made, so
`wait_for_subscribers` returns only once a router's SUB will receive the
first batch (no slow-joiner loss, which a plain PUB cannot rule out).
"""

from __future__ import annotations

import time

import msgpack

from harness.errors import SubscriptionError, require

TOPIC = b""
SUBSCRIBE_TIMEOUT_S = 30.0


def batch_payload(events: list[bytes], ts: float) -> bytes:
    """A KVEventBatch of already-encoded events, as vLLM's encoder writes
    one: ``[ts, [event, ...], data_parallel_rank]``, the rank nil (Dynamo's
    relay refuses a batch of two elements)."""
    packer = msgpack.Packer()
    head = packer.pack_array_header(3) + packer.pack(ts)
    events_part = packer.pack_array_header(len(events)) + b"".join(events)
    return head + events_part + packer.pack(None)


class StreamPublisher:
    """Binds ``tcp://127.0.0.1:<free port>``; `endpoint` is what a
    subscriber connects to. A router adapter's stream source: `sequence`
    and `events` count what was published (`batch_events`: each batch's
    events, by sequence number), and, since this publisher is the harness's
    own, a router may `send` batches of its own to settle on (`injects`)."""

    injects = True

    def __init__(self):
        zmq = require("zmq", "capture")
        self._zmq = zmq
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.XPUB)
        self.socket.setsockopt(zmq.XPUB_VERBOSE, 1)
        self.socket.setsockopt(zmq.LINGER, 0)
        port = self.socket.bind_to_random_port("tcp://127.0.0.1")
        self.endpoint = f"tcp://127.0.0.1:{port}"
        self.sequence = 0  # the next batch's
        self.events = 0  # published so far
        self.batch_events: list[int] = []
        self.subscriptions = 0

    def wait_for_subscribers(self, count: int = 1) -> None:
        """Return once ``count`` subscriptions to the topic have arrived."""
        deadline = time.monotonic() + SUBSCRIBE_TIMEOUT_S
        while self.subscriptions < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SubscriptionError(
                    f"{self.endpoint}: {self.subscriptions} of {count} router "
                    f"subscriptions arrived within {SUBSCRIBE_TIMEOUT_S:.0f} s"
                )
            if self.socket.poll(remaining * 1000, self._zmq.POLLIN):
                message = self.socket.recv()
                if message[:1] == b"\x01" and message[1:] == TOPIC:
                    self.subscriptions += 1

    def send(self, events: list[bytes]) -> int:
        """Publish one batch; its sequence number."""
        sequence = self.sequence
        payload = batch_payload(events, time.time())
        self.socket.send_multipart([TOPIC, sequence.to_bytes(8, "big"), payload])
        self.sequence += 1
        self.events += len(events)
        self.batch_events.append(len(events))
        return sequence

    def close(self) -> None:
        self.socket.close()
        self.context.term()

    def __enter__(self) -> StreamPublisher:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
