"""A live KV-event stream, from vLLM's ZMQ publisher.

vLLM's ZMQ publisher sends multipart messages ``(topic, 8-byte big-endian
sequence number, payload)``, the payload one msgpack ``KVEventBatch``; the
sequence numbers start at 0 and go up by one per message
(ZmqEventPublisher._seq_gen), so `SequenceCheck` sees a message the
subscriber missed (a slow joiner, a dropped message) as a gap. A capture file
is the payloads laid back to back, which is what ``check-stream`` reads, and
its sequence numbers are kept beside it, one per line in FILE.seq
(`SEQUENCE_SUFFIX`), so that a gap in a captured file can be seen too.

The publisher binds wildcard (``tcp://*:PORT``, ``::``) and ipc/inproc
endpoints and connects to every other one, so the subscriber does the
opposite: it binds ``tcp://127.0.0.1:PORT`` and connects to ``tcp://*``-style
endpoints by their host.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from harness.contract.wire import KVEventBatch
from harness.errors import SubscriptionError, UnreadableInput, require

SEQUENCE_SUFFIX = ".seq"
GAPS_NAMED = 3


@dataclass
class SequenceCheck:
    """The publisher's sequence numbers as they arrived, and what is missing."""

    expected: int = 0
    received: int = 0
    missing: int = 0
    gaps: list[str] = field(default_factory=list)

    def see(self, seq: int) -> None:
        if seq > self.expected:
            self.missing += seq - self.expected
            missed = (
                f"message {self.expected}"
                if seq == self.expected + 1
                else f"messages {self.expected}-{seq - 1}"
            )
            if self.received == 0:
                missed += " (sent before the subscription started)"
            self.gaps.append(missed)
        elif seq < self.expected:
            self.gaps.append(
                f"the sequence went back from {self.expected - 1} to {seq} "
                f"(a restarted publisher?)"
            )
        self.expected = seq + 1
        self.received += 1

    def incomplete(self) -> str | None:
        """What is missing, in a few words, or None when nothing is."""
        if not self.gaps:
            return None
        named = "; ".join(self.gaps[:GAPS_NAMED])
        more = (
            f"; {len(self.gaps) - GAPS_NAMED} more gap(s)"
            if len(self.gaps) > GAPS_NAMED
            else ""
        )
        return f"{self.missing} message(s) missing: {named}{more}"


def sequence_file(capture: Path) -> Path:
    """Where a capture file's sequence numbers are kept."""
    return capture.with_name(capture.name + SEQUENCE_SUFFIX)


def read_sequence_numbers(path: Path) -> list[int]:
    numbers = []
    with path.open("rb") as lines:
        for number, line in enumerate(lines, 1):
            try:
                numbers.append(int(line))
            except ValueError:
                raise UnreadableInput(
                    f"{path}:{number}: not a sequence number: {line[:40]!r}"
                ) from None
    return numbers


_batch_decoder = msgspec.msgpack.Decoder(KVEventBatch)


def publisher_binds(endpoint: str) -> bool:
    """vLLM's rule (ZmqEventPublisher._is_bind_endpoint) for its PUB socket."""
    return (
        "*" in endpoint
        or "::" in endpoint
        or endpoint.startswith(("ipc://", "inproc://"))
    )


def count_events(payload: bytes) -> int | None:
    """Number of events in a payload, None if it is not a KVEventBatch."""
    try:
        return len(_batch_decoder.decode(payload).events)
    except msgspec.DecodeError:
        return None


def subscribe(
    endpoint: str,
    topic: str = "",
    max_events: int | None = None,
    timeout: float | None = None,
) -> Iterator[tuple[bytes, int | None]]:
    """Yield ``(payload, number of events)`` until ``max_events`` events
    arrived or ``timeout`` seconds passed; the number is None for a payload
    that is not a KVEventBatch.

    Sequence gaps (messages the subscriber missed, e.g. while it was not yet
    connected) are reported on stderr: a stream with a gap cannot be replayed
    faithfully. `subscribe_numbered` gives the numbers to the caller instead.
    """
    expected_seq = None
    for seq, payload, count in subscribe_numbered(endpoint, topic, max_events, timeout):
        if expected_seq is not None and seq != expected_seq:
            print(
                f"subscribe: sequence gap: expected {expected_seq}, got {seq}",
                file=sys.stderr,
            )
        expected_seq = seq + 1
        yield payload, count


def subscribe_numbered(
    endpoint: str,
    topic: str = "",
    max_events: int | None = None,
    timeout: float | None = None,
) -> Iterator[tuple[int, bytes, int | None]]:
    """Yield ``(sequence number, payload, number of events)`` as `subscribe`
    does its pairs."""
    zmq = require("zmq", "capture")  # only the subscribing verbs need pyzmq

    try:
        yield from _messages(zmq, endpoint, topic, max_events, timeout)
    except zmq.ZMQError as exc:
        raise SubscriptionError(f"{endpoint}: {exc}") from None


def _check_port(endpoint: str) -> None:
    """libzmq takes a TCP port over 65535 without a word (and binds another)."""
    if endpoint.startswith("tcp://"):
        port = endpoint.rsplit(":", 1)[-1]
        if port.isdigit() and not 0 < int(port) < 65536:
            raise SubscriptionError(f"{endpoint}: port {port} is not 1-65535")


def _messages(zmq, endpoint, topic, max_events, timeout):
    _check_port(endpoint)
    context = zmq.Context.instance()
    socket = context.socket(zmq.SUB)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.SUBSCRIBE, topic.encode())
    if publisher_binds(endpoint):
        socket.connect(endpoint.replace("*", "127.0.0.1"))
    else:
        socket.bind(endpoint)
    deadline = None if timeout is None else time.monotonic() + timeout
    events = 0
    try:
        while max_events is None or events < max_events:
            wait_ms = None
            if deadline is not None:
                wait_ms = max(0, int((deadline - time.monotonic()) * 1000))
                if wait_ms == 0:
                    return
            if not socket.poll(wait_ms):
                return
            frames = socket.recv_multipart()
            if len(frames) != 3:
                print(
                    f"subscribe: skipped a message of {len(frames)} frames",
                    file=sys.stderr,
                )
                continue
            _, seq_bytes, payload = frames
            count = count_events(payload)
            events += count or 0
            yield int.from_bytes(seq_bytes, "big"), payload, count
    finally:
        socket.close()
