"""The e2e session's capture checks the publisher's sequence numbers: what
it missed (the start of the stream, a slow joiner under load) comes from the
engine's replay endpoint, or the capture fails naming the missing range.
The engine is `tests/support/publisher.py`'s fake: a PUB that connects to
the capture, as vLLM's does to the session's endpoint, and a replay ROUTER."""

import threading
import time

import pytest
from support.events import payload, stored
from support.publisher import free_port, publish_with_replay

from harness.engine import session
from harness.errors import E2EError

MESSAGES = [(n, payload(stored([n + 1], n or None))) for n in range(5)]


class FakeEngine:
    """An engine process as the capture polls it: running for ``runs_s``."""

    def __init__(self, runs_s: float):
        self.ends = time.monotonic() + runs_s

    def poll(self):
        return None if time.monotonic() < self.ends else 0


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(session, "QUIET_S", 0.3)
    monkeypatch.setattr(session, "ALARM_EVERY_S", 0.1)


def capture(buffered, live, with_replay=True):
    """What capture_until_quiet returns (or raises) against the fake engine,
    the ranges replayed, and the two endpoints."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    replay = f"tcp://127.0.0.1:{free_port()}"
    stop = threading.Event()
    thread = threading.Thread(
        target=publish_with_replay,
        args=(endpoint, replay, buffered, live, stop),
        kwargs={"binds": False},
    )
    thread.start()
    replayed: list[tuple[int, int]] = []
    try:
        got = session.capture_until_quiet(
            endpoint,
            FakeEngine(1.0),
            time.monotonic() + 20,
            replay if with_replay else None,
            replayed,
        )
    finally:
        stop.set()
        thread.join()
    return got, replayed, endpoint, replay


def test_a_whole_stream_is_captured_without_asking_the_replay(quick):
    got, replayed, _, _ = capture([], MESSAGES)
    assert got == [data for _, data in MESSAGES]
    assert replayed == []


def test_a_start_the_capture_missed_comes_from_the_replay_endpoint(quick):
    got, replayed, _, _ = capture(MESSAGES[:3], MESSAGES[3:])
    assert got == [data for _, data in MESSAGES]  # in sequence order
    assert replayed == [(0, 2)]


def test_a_start_the_replay_no_longer_holds_fails_naming_the_range(quick):
    with pytest.raises(E2EError) as failed:
        capture(MESSAGES[2:3], MESSAGES[3:])
    line = str(failed.value)
    assert "\n" not in line
    assert line.startswith("the capture of the engine's stream at tcp://127.0.0.1:")
    assert (
        " is not whole: 2 message(s) missing: messages 0-1 (sent before the "
        "subscription started); the replay endpoint tcp://127.0.0.1:"
    ) in line
    assert line.endswith(
        " no longer held them, and a stream with a hole would read as contract "
        "violations"
    )


def test_without_a_replay_endpoint_a_missed_start_fails_naming_the_range(quick):
    with pytest.raises(E2EError) as failed:
        capture(MESSAGES[:3], MESSAGES[3:], with_replay=False)
    assert "3 message(s) missing: messages 0-2 (sent before the subscription " in (
        str(failed.value)
    )
    assert str(failed.value).endswith(
        "; no replay endpoint to ask, and a stream with a hole would read as "
        "contract violations"
    )


def test_a_message_dropped_midway_is_replayed_in_its_place(quick):
    dropped = MESSAGES[:2] + MESSAGES[3:]
    got, replayed, _, _ = capture([MESSAGES[2]], dropped)
    # the fake keeps the buffered message and the live ones, as vLLM's does
    assert got == [data for _, data in MESSAGES]
    assert replayed == [(2, 2)]


def test_the_engine_is_told_its_replay_endpoint():
    from pathlib import Path

    command = session.engine_command(
        Path("m"), "tcp://127.0.0.1:1", "float32", 0, Path("r"), "tcp://127.0.0.1:2"
    )
    assert command[-2:] == ["--replay-endpoint", "tcp://127.0.0.1:2"]
    assert "--replay-endpoint" not in session.engine_command(
        Path("m"), "tcp://127.0.0.1:1", "float32", 0, Path("r")
    )


def test_the_engine_verb_hands_its_replay_endpoint_to_the_session(monkeypatch):
    from harness import cli
    from harness.engine import engine

    seen = []
    monkeypatch.setattr(engine, "engine_session", lambda *args: seen.append(args))
    argv = ["e2e", "engine", "--model", "m", "--endpoint", "tcp://127.0.0.1:1"]
    argv += ["--dtype", "float32", "--seed", "0"]
    assert cli.main([*argv, "--replay-endpoint", "tcp://127.0.0.1:2"]) == 0
    assert seen[0][-1] == "tcp://127.0.0.1:2"
