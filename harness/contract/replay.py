"""vLLM's replay endpoint: the messages a late or dropped subscriber missed.

vLLM's publisher can keep its last batches for replay (``replay_endpoint``,
a ROUTER it binds; ``buffer_steps`` batches): a DEALER that sends it a start
sequence number gets every message it still holds from there, then an end
marker (`END_SEQ`). `replay` asks for a range and bounds what it takes in
time, messages and bytes; `with_replay` fills a live stream's gaps from it.
"""

from __future__ import annotations

import time

from harness.contract.subscribe import count_events, local
from harness.contract.wire import MAX_PAYLOAD_BYTES
from harness.errors import SubscriptionError, require

# How long a replay endpoint has to answer, and to finish sending.
REPLAY_WAIT_S = 10.0
# The most a replay may send, whatever it holds: vLLM's sends its buffer once
# (buffer_steps batches, 10,000 by default, of kilobytes each), then an end
# marker; an endpoint that sends more is refused, not held.
REPLAY_MAX_MESSAGES = 100_000
REPLAY_MAX_BYTES = 512 << 20
# vLLM's end-of-replay marker (ZmqEventPublisher.END_SEQ): sequence -1.
END_SEQ = (-1).to_bytes(8, "big", signed=True)


def replay(
    endpoint: str, start: int, end: int, topic: str = ""
) -> list[tuple[int, bytes, int | None]]:
    """The messages ``start`` to ``end - 1`` that vLLM's replay endpoint still
    holds, as `Subscription` yields them (fewer when its buffer no longer
    reaches back to ``start``). The replay is bounded: it ends within
    `REPLAY_WAIT_S`, and after `REPLAY_MAX_MESSAGES` messages or
    `REPLAY_MAX_BYTES` bytes, whichever comes first, and an endpoint that
    reaches a bound is an error that names it; a message sent twice is kept
    once."""
    zmq = require("zmq", "capture")
    socket = zmq.Context.instance().socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.MAXMSGSIZE, MAX_PAYLOAD_BYTES)
    found: dict[int, tuple[int, bytes, int | None]] = {}
    messages = size = 0
    deadline = time.monotonic() + REPLAY_WAIT_S
    last = time.monotonic()  # when the last message arrived
    try:
        socket.connect(local(endpoint))
        socket.send_multipart([b"", start.to_bytes(8, "big")])
        while True:
            wait_ms = max(0, int((deadline - time.monotonic()) * 1000))
            arrived = socket.poll(wait_ms)
            # Silent for half the wait: it stopped (not a flood cut at the end).
            silent = time.monotonic() - last >= REPLAY_WAIT_S / 2
            if not arrived and messages and silent:
                raise SubscriptionError(
                    f"replay endpoint {endpoint} sent {messages} messages "
                    f"({size} bytes, {len(found)} of them asked for), then "
                    f"nothing, and no end marker in {REPLAY_WAIT_S:g} s: not "
                    f"vLLM's replay (its buffer, then an end marker)"
                )
            if not arrived and not messages:
                raise SubscriptionError(
                    f"replay endpoint {endpoint} did not answer in "
                    f"{REPLAY_WAIT_S:g} s; give the engine's kv_events_config "
                    f"replay_endpoint (it binds it; tcp://HOST:PORT here)"
                )
            if not arrived or time.monotonic() >= deadline:
                raise SubscriptionError(
                    _replay_stopped(endpoint, messages, size, len(found))
                )
            frames = socket.recv_multipart()
            last = time.monotonic()
            messages += 1
            size += sum(len(frame) for frame in frames)
            if messages > REPLAY_MAX_MESSAGES or size > REPLAY_MAX_BYTES:
                bound = (
                    f"{REPLAY_MAX_MESSAGES} messages"
                    if messages > REPLAY_MAX_MESSAGES
                    else f"{REPLAY_MAX_BYTES >> 20} MiB"
                )
                raise SubscriptionError(
                    _replay_stopped(endpoint, messages, size, len(found), bound)
                )
            if len(frames) != 4 or len(frames[2]) != 8:
                continue  # not a message of vLLM's replay
            _, message_topic, seq_bytes, payload = frames
            if seq_bytes == END_SEQ:
                return [found[seq] for seq in sorted(found)]
            seq = int.from_bytes(seq_bytes, "big")
            if (
                start <= seq < end
                and seq not in found
                and message_topic.startswith(topic.encode())
            ):
                found[seq] = (seq, payload, count_events(payload))
    except zmq.ZMQError as exc:
        raise SubscriptionError(f"replay endpoint {endpoint}: {exc}") from None
    finally:
        socket.close()


def _replay_stopped(
    endpoint: str, messages: int, size: int, kept: int, bound: str | None = None
) -> str:
    """The line for a replay that reached a bound: more than ``bound``, or,
    without one, its time."""
    hit = (
        f"sent more than {bound}"
        if bound
        else f"was still sending after {REPLAY_WAIT_S:g} s"
    )
    return (
        f"replay endpoint {endpoint} {hit} without ending its replay "
        f"({messages} messages, {size} bytes, {kept} of them asked for): a "
        f"flood, not vLLM's replay (its buffer once, then an end marker); "
        f"stopped reading it"
    )


def with_replay(messages, endpoint: str | None, topic: str = "", replayed=None):
    """The messages in order, each gap before one filled from the replay
    endpoint (when one is given) as far as its buffer reaches; ``replayed``,
    a list, gets ``(first, last)`` of each range replayed."""
    expected = 0
    for seq, payload, count in messages:
        if endpoint is not None and seq > expected:
            found = replay(endpoint, expected, seq, topic)
            if found and replayed is not None:
                replayed.append((found[0][0], found[-1][0]))
            yield from found
        expected = max(expected, seq + 1)
        yield seq, payload, count
