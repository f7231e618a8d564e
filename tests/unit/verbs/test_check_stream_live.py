"""check-stream against a live publisher, as an operator runs it: vLLM's
default publisher (it binds, the check connects), an engine joined late (the
replay endpoint, or the first complete state), a clean stream of several
groups, a check stopped by Ctrl-C, and a frame over the size limit."""

import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import pytest
import zmq
from support import REPO_ROOT
from support.cli import harness, said
from support.events import cleared, payload, removed, stored
from support.publisher import (
    free_port,
    publish_with_replay,
    run_with_publisher,
    run_with_replay,
    start_publisher,
)
from support.stopping import default_signal_dispositions

from harness.contract.wire import MAX_PAYLOAD_BYTES

CHECK = ["check-stream", "--timeout", "20"]


def test_the_default_publisher_binds_and_the_check_connects():
    payloads = [payload(stored([1], None)), payload(stored([2], 1), removed([2, 1]))]
    result = run_with_publisher([*CHECK, "--max-events", "3"], payloads, binds=True)
    assert result.returncode == 0, result.stderr
    assert (
        ": 2 batches, 3 events, 0 stores of an already-live hash, 0 violations\n"
        in (result.stdout)
    )


def test_a_wildcard_endpoint_as_the_engine_is_configured_is_this_host():
    port = free_port()
    stop = threading.Event()
    from support.publisher import publish_like_vllm

    thread = threading.Thread(
        target=publish_like_vllm,
        args=(f"tcp://127.0.0.1:{port}", [payload(stored([1], None))], stop),
        kwargs={"binds": True},
    )
    thread.start()
    try:
        result = harness(*CHECK, "--max-events", "1", "--zmq", f"tcp://*:{port}")
    finally:
        stop.set()
        thread.join()
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"tcp://*:{port}: 1 batches, 1 events")


def test_a_clean_stream_of_two_groups_has_a_line_per_group():
    payloads = [
        payload(stored([1], None, group=0, kind="mamba"), stored([7], None, group=1)),
        payload(removed([1], group=0), removed([7], group=1)),
    ]
    result = run_with_publisher([*CHECK, "--max-events", "4"], payloads, binds=True)
    assert result.returncode == 0, result.stderr
    assert "  by view (medium, group, kind): violations at events\n" in result.stdout
    assert "    GPU group 0 (mamba): none\n" in result.stdout
    assert "    GPU group 1 (None): none\n" in result.stdout


LATE = [
    (5, payload(stored([12], 11))),  # its parent was stored before the join
    (6, payload(removed([11]), cleared(), stored([1], None))),
    (7, payload(stored([2], 1))),
]


def test_a_check_joined_late_starts_at_the_first_complete_state():
    numbers, payloads = zip(*LATE, strict=True)
    result = run_with_publisher(
        [*CHECK, "--max-events", "5"], list(payloads), list(numbers), binds=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        ": 2 batches, 3 events, 0 stores of an already-live hash, 0 violations\n"
        in (result.stdout)
    )
    assert (
        "  joined at message 5 (messages 0-4 were sent before the subscription "
        "started); checked from message 6's AllBlocksCleared (a prefix-cache "
        "reset: the first complete state) on, 1 message(s) before it counted, "
        "not checked\n"
    ) in result.stdout


def test_a_check_joined_late_without_a_complete_state_is_incomplete():
    numbers, payloads = zip(*LATE[:1], (7, payload(stored([13], 12))), strict=True)
    result = run_with_publisher(
        [*CHECK, "--max-events", "2"], list(payloads), list(numbers), binds=True
    )
    assert result.returncode == 16
    [line] = said(result.stderr)
    assert line.endswith(
        ": incomplete: joined at message 5 (messages 0-4 were sent before the "
        "subscription started), and no AllBlocksCleared followed to start from: "
        "nothing checked. Give --replay the engine's replay_endpoint, or reset its "
        "prefix cache while checking (POST /reset_prefix_cache, with "
        "VLLM_SERVER_DEV_MODE=1)"
    )
    assert "C1" not in result.stdout  # joining late is not a violation


def test_a_message_0_after_a_late_first_is_named_a_restart_not_a_reset():
    """The first message numbered ff..ff, then message 0 (no AllBlocksCleared
    in it): the check starts at message 0, and the note says why."""
    numbers = [2**64 - 1, 0, 1]
    payloads = [
        payload(stored([12], 11)),
        payload(stored([1], None)),
        payload(stored([2], 1)),
    ]
    result = run_with_publisher(
        [*CHECK, "--max-events", "3"], payloads, numbers, binds=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert ": 2 batches, 2 events, 0 stores of an already-live hash, 0 " in (
        result.stdout
    )
    assert (
        f"  joined at message {2**64 - 1} (messages 0-{2**64 - 2} were sent "
        f"before the subscription started); then the sequence went back to 0 "
        f"(a restarted publisher?): checked from that message 0, the new "
        f"stream's first, on, 1 message(s) before it counted, not checked\n"
    ) in result.stdout
    assert "AllBlocksCleared" not in result.stdout
    assert said(result.stderr) == []


def test_the_replay_endpoint_gives_what_a_late_check_missed():
    before = [(0, payload(stored([1], None))), (1, payload(stored([2], 1)))]
    live = [(2, payload(stored([3], 2))), (3, payload(removed([3, 2, 1])))]
    result = run_with_replay([*CHECK, "--max-events", "6"], before, live)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        ": 4 batches, 4 events, 0 stores of an already-live hash, 0 violations\n"
        in (result.stdout)
    )
    assert "  messages 0-1 replayed from tcp://127.0.0.1:" in result.stdout
    assert "joined at" not in result.stdout


def test_a_replay_buffer_that_no_longer_reaches_back_falls_back_to_a_reset():
    before = [(4, payload(stored([12], 11))), (5, payload(cleared()))]
    live = [(6, payload(stored([1], None))), (7, payload(stored([2], 1)))]
    result = run_with_replay([*CHECK, "--max-events", "3"], before, live)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "  messages 4-5 replayed from tcp://127.0.0.1:" in result.stdout
    assert "joined at message 4 (messages 0-3 were sent" in result.stdout
    assert "checked from message 5's AllBlocksCleared" in result.stdout


def test_a_replay_endpoint_that_does_not_answer_is_one_line(monkeypatch):
    from harness.contract import replay as replay_endpoint

    monkeypatch.setattr(replay_endpoint, "REPLAY_WAIT_S", 0.3)
    found = []
    with pytest.raises(Exception) as failed:
        found = replay_endpoint.replay(f"tcp://127.0.0.1:{free_port()}", 0, 3)
    assert found == []
    assert str(failed.value).startswith("replay endpoint tcp://127.0.0.1:")
    assert "did not answer in 0.3 s" in str(failed.value)


@contextmanager
def flooding_replay(flood: bytes):
    """A replay endpoint that answers a request with its start message, again
    and again, never ending the replay."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    replay = f"tcp://127.0.0.1:{free_port()}"
    stop = threading.Event()
    thread = threading.Thread(
        target=publish_with_replay, args=(endpoint, replay, [], [], stop, flood)
    )
    thread.start()
    try:
        yield replay
    finally:
        stop.set()
        thread.join()


@pytest.mark.parametrize(
    ("bound", "value", "hit"),
    [
        ("REPLAY_WAIT_S", 1.0, "was still sending after 1 s"),
        ("REPLAY_MAX_MESSAGES", 50, "sent more than 50 messages"),
        ("REPLAY_MAX_BYTES", 1 << 20, "sent more than 1 MiB"),
    ],
)
def test_a_replay_endpoint_that_floods_is_stopped_at_the_bound_it_hits(
    monkeypatch, bound, value, hit
):
    from harness.contract import replay as replay_endpoint
    from harness.errors import SubscriptionError

    # Only the bound under test can be hit: the others are out of reach (a
    # fast machine floods 512 MiB in well under a second).
    monkeypatch.setattr(replay_endpoint, "REPLAY_WAIT_S", 5.0)
    monkeypatch.setattr(replay_endpoint, "REPLAY_MAX_MESSAGES", 1 << 40)
    monkeypatch.setattr(replay_endpoint, "REPLAY_MAX_BYTES", 1 << 60)
    monkeypatch.setattr(replay_endpoint, bound, value)
    started = time.monotonic()
    with (
        flooding_replay(b"x" * (64 << 10)) as replay,
        pytest.raises(SubscriptionError) as failed,
    ):
        replay_endpoint.replay(replay, 1, 3)
    assert time.monotonic() - started < 5.0 or bound == "REPLAY_WAIT_S"
    line = str(failed.value)
    assert line.startswith(f"replay endpoint {replay} {hit} without ending its ")
    assert ", 1 of them asked for): a flood, not vLLM's replay " in line
    assert "did not answer" not in line
    assert "\n" not in line


def test_a_check_whose_replay_floods_with_large_frames_stops_at_its_bytes():
    """4 MiB frames of one in-range message, sent without end: the check
    exits 10 with the bound named, holding the message once, not 3.5 GB."""
    live = [(2, payload(stored([3], None)))]
    result = run_with_replay(
        ["check-stream", "--timeout", "30", "--max-events", "1"],
        [],
        live,
        flood=b"x" * (4 << 20),
    )
    assert result.returncode == 10, result.stdout + result.stderr
    [line] = said(result.stderr)
    assert " sent more than 512 MiB without ending its replay (" in line
    assert line.endswith(
        "1 of them asked for): a flood, not vLLM's replay (its buffer once, then "
        "an end marker); stopped reading it"
    )
    assert result.stdout == ""


def test_replay_goes_with_a_live_check(tmp_path):
    result = harness("check-stream", str(tmp_path / "x.bin"), "--replay", "tcp://h:1")
    assert result.returncode == 2
    assert "--replay goes with --zmq or --listen" in result.stderr


@contextmanager
def publisher_and_check(command, **options):
    """A bound XPUB publisher, and the check (``command``, which connects to
    it: its endpoint replaces ENDPOINT) started as a child; both ended after."""
    port = free_port()
    publisher = zmq.Context.instance().socket(zmq.XPUB)
    publisher.setsockopt(zmq.LINGER, 0)
    # Every subscription, also a reconnecting check's while its old
    # connection is still being torn down (XPUB drops that duplicate).
    publisher.setsockopt(zmq.XPUB_VERBOSE, 1)
    publisher.bind(f"tcp://127.0.0.1:{port}")
    endpoint = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen(
        [endpoint if word == "ENDPOINT" else word for word in command],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **options,
    )
    try:
        yield publisher, process
    finally:
        publisher.close()
        if process.poll() is None:
            process.kill()
            process.communicate()


def check_then_interrupt(publisher_payloads):
    """A check connected to a binding publisher, stopped with Ctrl-C once the
    publisher has sent its payloads (or at once when there are none)."""
    command = [sys.executable, "-m", "harness", "check-stream", "--timeout", "900"]
    with publisher_and_check(
        [*command, "--zmq", "ENDPOINT"], preexec_fn=default_signal_dispositions
    ) as (publisher, process):
        assert publisher.poll(30_000), "the check did not subscribe"
        publisher.recv()
        for seq, data in enumerate(publisher_payloads):
            publisher.send_multipart((b"kv", seq.to_bytes(8, "big"), data))
        time.sleep(1.0)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    return process.returncode, out, err


def test_an_interrupted_check_says_so():
    status, out, _ = check_then_interrupt([payload(stored([1], None))] * 2)
    assert status == 0
    assert "  stopped by Ctrl-C after 2 message(s)\n" in out
    assert "1 stores of an already-live hash" in out


def test_a_check_interrupted_before_anything_arrived_says_so():
    status, _, err = check_then_interrupt([])
    assert status == 16
    assert err.splitlines()[-1].endswith(
        ": incomplete: stopped by Ctrl-C before any message arrived"
    )


# Runs its command and prints the peak memory of it, in KiB, as its last line.
PEAK_MEMORY = (
    "import resource, subprocess, sys\n"
    "status = subprocess.call(sys.argv[1:])\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(status)\n"
)


def wait_for_subscription(publisher) -> None:
    """Until a subscriber subscribes (b"\\x01..."; b"\\x00..." is one leaving)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if publisher.poll(100) and publisher.recv().startswith(b"\x01"):
            return
    raise AssertionError("no subscriber came")


def test_a_frame_over_the_limit_is_refused_before_it_is_held_whole():
    """A small message, a 96 MiB one, a small one: the check refuses the
    second (ZMQ closes its connection before the frame is held whole),
    reconnects, sees the third, and reports the gap, in far less memory than
    the frame."""
    command = [sys.executable, "-c", PEAK_MEMORY, sys.executable, "-m", "harness"]
    command += ["check-stream", "--timeout", "30", "--max-events", "2"]
    small = payload(stored([1], None))
    big = b"\x00" * (MAX_PAYLOAD_BYTES + (32 << 20))
    with publisher_and_check([*command, "--zmq", "ENDPOINT"]) as (publisher, process):
        wait_for_subscription(publisher)
        publisher.send_multipart((b"kv", (0).to_bytes(8, "big"), small))
        publisher.send_multipart((b"kv", (1).to_bytes(8, "big"), big))
        wait_for_subscription(publisher)  # reconnected after the refusal
        publisher.send_multipart((b"kv", (2).to_bytes(8, "big"), small))
        out, err = process.communicate(timeout=60)
    *lines, peak_kib = err.splitlines()
    assert process.returncode == 16, out + err
    assert lines[-1].endswith(": incomplete: 1 message(s) missing: message 1")
    assert "the publisher's connection closed 1 time(s)" in out
    assert "over the 64 MiB limit" in out
    assert int(peak_kib) >> 10 < 80, f"the check held {int(peak_kib) >> 10} MiB"


@pytest.mark.parametrize("verb", ["check-stream", "capture"])
def test_messages_not_of_vllms_form_are_counted_not_taken_for_silence(tmp_path, verb):
    """A 2-frame message and 9-, 3- and 0-byte sequence numbers: each is
    skipped, and the line says so rather than that nothing arrived."""
    command = [sys.executable, "-m", "harness", verb, "--timeout", "3"]
    if verb == "capture":
        command += ["--out", str(tmp_path / "kv.bin")]
    good = payload(stored([1], None))
    with publisher_and_check([*command, "--zmq", "ENDPOINT"]) as (publisher, process):
        assert publisher.poll(30_000), "the check did not subscribe"
        publisher.recv()
        publisher.send_multipart((b"kv", good))
        for width in (9, 3, 0):
            publisher.send_multipart((b"kv", (0).to_bytes(width, "big"), good))
        out, err = process.communicate(timeout=30)
    assert process.returncode == 16
    assert err.count("subscribe: skipped a message of ") == 4
    assert "skipped a message of a 9-byte sequence number" in err
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert line.endswith(
        ": incomplete: no message arrived in 3 s; 4 message(s) not of vLLM's "
        "form (topic, 8-byte sequence number, payload) skipped"
        + (f"; {tmp_path / 'kv.bin'} left as it was" if verb == "capture" else "")
    )
    assert list(tmp_path.iterdir()) == []


def test_a_message_sent_again_is_named_as_such():
    from harness.contract.subscribe import SequenceCheck

    sequence = SequenceCheck()
    for seq in (0, 1, 1, 2, 0):
        sequence.see(seq)
    assert sequence.incomplete() == (
        "0 message(s) missing: message 1 arrived again; the sequence went back "
        "from 2 to 0 (a restarted publisher?)"
    )


def test_a_replay_that_stops_without_its_end_marker_is_not_called_a_flood(
    monkeypatch,
):
    from harness.contract import replay as replay_endpoint
    from harness.errors import SubscriptionError

    monkeypatch.setattr(replay_endpoint, "REPLAY_WAIT_S", 1.0)
    router = zmq.Context.instance().socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    router.bind(endpoint)

    def answer_then_fall_silent():
        client, _, _ = router.recv_multipart()
        router.send_multipart((client, b"", b"kv", (0).to_bytes(8, "big"), b"x"))

    thread = threading.Thread(target=answer_then_fall_silent)
    thread.start()
    try:
        with pytest.raises(SubscriptionError) as failed:
            replay_endpoint.replay(endpoint, 0, 2)
    finally:
        thread.join()
        router.close()
    assert str(failed.value) == (
        f"replay endpoint {endpoint} sent 1 messages (11 bytes, 1 of them asked "
        f"for), then nothing, and no end marker in 1 s: not vLLM's replay (its "
        f"buffer, then an end marker)"
    )


def test_a_live_check_says_it_subscribed_and_how_far_it_got(monkeypatch, capsys):
    """The subscribed line first, then a progress line every PROGRESS_S of
    the clock (here one that moves PROGRESS_S at each reading), the report on
    stdout as without them."""
    from itertools import count

    from harness import cli
    from harness.verbs import check_stream

    readings = count(0, check_stream.PROGRESS_S)
    monkeypatch.setattr(check_stream, "PROGRESS_CLOCK", lambda: next(readings))
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    payloads = [payload(stored([2], 1)), payload(stored([3], 2), removed([3]))]
    stop, thread = start_publisher(endpoint, payloads, binds=True)
    try:
        status = cli.main(
            ["check-stream", "--max-events", "3", "--topic", "kv", "--zmq", endpoint]
        )
    finally:
        stop.set()
        thread.join()
    out, err = capsys.readouterr()
    assert status == 1
    assert out.startswith(f"{endpoint}: 2 batches, 3 events, 0 stores of an ")
    lines = err.splitlines()
    assert lines[0] == (
        f"harness: check-stream: subscribed to {endpoint} (connected to the "
        "engine's publisher), topic 'kv'"
    )
    assert (
        "harness: check-stream: 1 message(s) received; 1 batches, 1 events "
        "checked, 1 violations so far"
    ) in lines
    assert all(line.startswith("harness: check-stream: ") for line in lines)


def test_a_live_check_joined_late_says_it_waits_for_a_start():
    from harness.contract.checker import StreamChecker
    from harness.contract.subscribe import StartPoint
    from harness.verbs.check_stream import live_progress

    start = StartPoint()
    assert start.checkable(5, []) is None
    assert live_progress(1, start, StreamChecker()) == (
        "check-stream: 1 message(s) received, none checked yet: waiting for an "
        "AllBlocksCleared to start from"
    )
