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
endpoints and connects to every other one. A subscriber of an engine that
binds connects to it (``tcp://HOST:PORT``; ``*`` is this host):
``bind=False``, what ``--zmq`` does; one of an engine configured with
``tcp://HOST:PORT`` binds it and waits: ``bind=True`` (``--listen``);
``bind=None`` follows vLLM's rule for the engine's own endpoint.

Every inbound frame is capped at `MAX_PAYLOAD_BYTES` (ZMQ's MAXMSGSIZE):
ZMQ closes the connection that sends a larger one before holding it whole,
and `Subscription.disconnects` counts those, so the gap can be told.

vLLM's publisher can also keep its last batches for replay
(``replay_endpoint``; harness.contract.replay asks it for the messages a
late or dropped subscriber missed), and `StartPoint` says where a check of a
stream joined late can start without them: at the first
``AllBlocksCleared`` (a prefix-cache reset), after which every view is empty
and every later event is checkable.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from harness.contract.ipc import check_ipc_bind
from harness.contract.wire import MAX_PAYLOAD_BYTES, AllBlocksCleared, KVEventBatch
from harness.errors import SubscriptionError, UnreadableInput, require
from harness.reading import bounded_lines, open_regular

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
        elif seq == self.expected - 1:
            self.gaps.append(f"message {seq} arrived again")
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


SEQ_LINE_MAX = 64  # the longest line of a .seq file: 2**64 - 1 has 20 digits


def read_sequence_numbers(path: Path, most: int) -> list[int]:
    """The first ``most`` numbers of a .seq file, one a line (harness.reading:
    a regular file, lines of at most SEQ_LINE_MAX bytes)."""
    numbers = []
    with open_regular(path) as stream:
        for number, line in enumerate(bounded_lines(stream, SEQ_LINE_MAX, most), 1):
            try:
                seq = int(line)
            except ValueError:
                seq = -1
            if not 0 <= seq < 1 << 64:  # the publisher's 8 bytes, unsigned
                raise UnreadableInput(
                    f"{path}:{number}: not a sequence number (0 to 2**64 - 1): "
                    f"{line[:40]!r}"
                )
            numbers.append(seq)
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
    bind: bool | None = None,
) -> Iterator[tuple[bytes, int | None]]:
    """Yield ``(payload, number of events)`` until ``max_events`` events
    arrived or ``timeout`` seconds passed; the number is None for a payload
    that is not a KVEventBatch.

    Sequence gaps (messages the subscriber missed, e.g. while it was not yet
    connected) are reported on stderr: a stream with a gap cannot be replayed
    faithfully. `subscribe_numbered` gives the numbers to the caller instead.
    """
    expected_seq = None
    messages = subscribe_numbered(endpoint, topic, max_events, timeout, bind)
    try:
        for seq, payload, count in messages:
            if expected_seq is not None and seq != expected_seq:
                print(
                    f"subscribe: sequence gap: expected {expected_seq}, got {seq}",
                    file=sys.stderr,
                )
            expected_seq = seq + 1
            yield payload, count
    finally:
        messages.close()


def subscribe_numbered(
    endpoint: str,
    topic: str = "",
    max_events: int | None = None,
    timeout: float | None = None,
    bind: bool | None = None,
    watch: Watch | None = None,
) -> Subscription:
    """``(sequence number, payload, number of events)`` as `subscribe` yields
    its pairs; close it when done. ``watch`` is told when the socket is
    subscribed, and every few seconds while it runs."""
    return Subscription(endpoint, topic, max_events, timeout, bind, watch)


@dataclass
class Watch:
    """What a subscription tells its caller while it runs: ``subscribed()``
    once its socket has connected or bound, ``tick()`` every ``every_s``
    seconds of ``clock`` (received messages or not)."""

    subscribed: Callable[[], None]
    tick: Callable[[], None]
    every_s: float
    clock: Callable[[], float] = time.monotonic


class Subscription:
    """A SUB socket's messages, iterated once; ``disconnects`` counts the
    connections to publishers that closed while it ran, ``malformed`` the
    messages skipped for not being vLLM's three frames with an 8-byte
    sequence number. ZMQ does not
    reconnect a connection it closed for a frame over MAXMSGSIZE, so a
    subscription that connects connects again."""

    def __init__(
        self, endpoint, topic="", max_events=None, timeout=None, bind=None, watch=None
    ):
        self.endpoint = endpoint
        self.watch = watch
        self.bind = publisher_connects(endpoint) if bind is None else bind
        self.disconnects = 0
        self.since_disconnect = 0  # messages received since the last one
        self.malformed = 0  # messages not (topic, 8-byte number, payload)
        self._zmq = require("zmq", "capture")  # only the subscribing verbs need it
        self._messages = self._guarded(topic, max_events, timeout)

    def __iter__(self):
        return self._messages

    def close(self) -> None:
        self._messages.close()

    def malformed_note(self) -> str:
        """The messages skipped as malformed, as the end of a line ("" when
        none was)."""
        if not self.malformed:
            return ""
        return (
            f"; {self.malformed} message(s) not of vLLM's form (topic, 8-byte "
            f"sequence number, payload) skipped"
        )

    def _ticks(self) -> Iterator[int] | None:
        """Tell the watch the socket is subscribed, then, at each turn of the
        receiving loop, tick it where its interval has passed and give the
        milliseconds to the next tick (None without a watch)."""
        if self.watch is None:
            return None
        watch = self.watch
        watch.subscribed()

        def turns():
            due = watch.clock() + watch.every_s
            while True:
                now = watch.clock()
                if now >= due:
                    watch.tick()
                    due = now + watch.every_s
                yield max(1, int((due - now) * 1000))

        return turns()

    def _guarded(self, topic, max_events, timeout):
        zmq = self._zmq
        try:
            yield from self._receive(topic, max_events, timeout)
        except zmq.ZMQError as exc:
            raise SubscriptionError(f"{self.endpoint}: {exc}") from None

    def _receive(self, topic, max_events, timeout):
        zmq = self._zmq
        _check_port(self.endpoint)
        if self.bind:
            check_ipc_bind(self.endpoint)
        socket = zmq.Context.instance().socket(zmq.SUB)
        socket.setsockopt(zmq.LINGER, 0)
        socket.setsockopt(zmq.MAXMSGSIZE, MAX_PAYLOAD_BYTES)
        socket.setsockopt(zmq.SUBSCRIBE, topic.encode())
        monitor = socket.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        poller = zmq.Poller()
        poller.register(socket, zmq.POLLIN)
        poller.register(monitor, zmq.POLLIN)
        deadline = None if timeout is None else time.monotonic() + timeout
        events = 0
        try:
            if self.bind:
                socket.bind(self.endpoint)
            else:
                socket.connect(local(self.endpoint))
            ticks = self._ticks()
            while max_events is None or events < max_events:
                wait_ms = None
                if deadline is not None:
                    wait_ms = max(0, int((deadline - time.monotonic()) * 1000))
                    if wait_ms == 0:
                        return
                if ticks is not None:
                    to_tick = next(ticks)
                    wait_ms = to_tick if wait_ms is None else min(wait_ms, to_tick)
                ready = dict(poller.poll(wait_ms))
                if not ready:
                    if ticks is None:
                        return
                    continue  # a tick, or the deadline: the loop's top says
                if monitor in ready:
                    monitor.recv_multipart()
                    self.disconnects += 1
                    self.since_disconnect = 0
                    if not self.bind:  # ZMQ does not reconnect after a refusal
                        with suppress(zmq.ZMQError):
                            socket.disconnect(local(self.endpoint))
                        socket.connect(local(self.endpoint))
                if socket not in ready:
                    continue
                frames = socket.recv_multipart()
                if len(frames) != 3 or len(frames[1]) != 8:
                    self.malformed += 1
                    shape = (
                        f"{len(frames)} frames"
                        if len(frames) != 3
                        else f"a {len(frames[1])}-byte sequence number"
                    )
                    print(f"subscribe: skipped a message of {shape}", file=sys.stderr)
                    continue
                _, seq_bytes, payload = frames
                count = count_events(payload)
                events += count or 0
                self.since_disconnect += 1
                yield int.from_bytes(seq_bytes, "big"), payload, count
        finally:
            socket.disable_monitor()
            monitor.close()
            socket.close()


def publisher_connects(endpoint: str) -> bool:
    """Whether vLLM's publisher connects to ``endpoint`` (so its subscriber
    must bind it)."""
    return not publisher_binds(endpoint)


def local(endpoint: str) -> str:
    """A publisher's bind endpoint as a subscriber connects to it: ``*`` is
    this host."""
    return endpoint.replace("*", "127.0.0.1")


@dataclass
class StartPoint:
    """Where the check of a live stream starts: at message 0 (the engine's
    first, also when it follows later ones: a restarted publisher), else at
    the first AllBlocksCleared, the first complete state (every view empty);
    the messages before it are counted, not checked."""

    first: int | None = None  # the first message's sequence number
    start: int | None = None  # the message the check starts at
    skipped: int = 0
    restarted: bool = False  # a message 0 after a later first: a new stream

    def checkable(self, seq: int, events: list) -> list | None:
        """The events of message ``seq`` to check, None before the start."""
        if self.start is not None:
            return events
        if self.first is None:
            self.first = seq
        if seq == 0:
            self.start = 0
            self.restarted = self.first > 0
            return events
        for index, event in enumerate(events):
            if type(event) is AllBlocksCleared:
                self.start = seq
                return events[index:]
        self.skipped += 1
        return None

    def joined_late(self) -> bool:
        return self.first is not None and self.first > 0

    def describe(self) -> str | None:
        """Where the check joined and started, or None when at message 0."""
        if not self.joined_late():
            return None
        joined = (
            f"joined at message {self.first} (messages 0-{self.first - 1} were "
            f"sent before the subscription started)"
        )
        if self.start is None:
            return joined
        if self.restarted:
            return (
                f"{joined}; then the sequence went back to 0 (a restarted "
                f"publisher?): checked from that message 0, the new stream's "
                f"first, on, {self.skipped} message(s) before it counted, not "
                f"checked"
            )
        return (
            f"{joined}; checked from message {self.start}'s AllBlocksCleared "
            f"(a prefix-cache reset: the first complete state) on, "
            f"{self.skipped} message(s) before it counted, not checked"
        )


def _check_port(endpoint: str) -> None:
    """libzmq takes a TCP port over 65535 without a word (and binds another)."""
    if endpoint.startswith("tcp://"):
        port = endpoint.rsplit(":", 1)[-1]
        if port.isdigit() and not 0 < int(port) < 65536:
            raise SubscriptionError(f"{endpoint}: port {port} is not 1-65535")
