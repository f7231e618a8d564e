"""The capture verb, against a publisher that behaves like vLLM's."""

import signal
import subprocess
import sys
import time

import pytest
from support import REPO_ROOT
from support.cli import harness
from support.events import payload, stored
from support.publisher import free_port, run_with_publisher, start_publisher
from support.stopping import default_signal_dispositions

from harness.errors import IncompleteStream, SubscriptionError

PAYLOADS = [payload(stored([1], None)), payload(stored([2], 1))]


def test_capture_writes_payloads_and_their_sequence_numbers(tmp_path):
    out = tmp_path / "captured.bin"
    result = run_with_publisher(
        ["capture", "--out", str(out), "--max-events", "2", "--timeout", "30"],
        PAYLOADS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"capture: wrote 2 batches, 2 events, {len(b''.join(PAYLOADS))} bytes to "
        f"{out} (sequence numbers in {out}.seq)"
    )
    assert out.read_bytes() == b"".join(PAYLOADS)
    assert (tmp_path / "captured.bin.seq").read_text() == "0\n1\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "captured.bin",
        "captured.bin.seq",
    ]


@pytest.mark.parametrize(
    ("endpoint", "status", "why"),
    [
        ("tcp://no-such-host.invalid:1", SubscriptionError.exit_code, ""),
        (
            "tcp://127.0.0.1:FREE",
            IncompleteStream.exit_code,
            "incomplete: no message arrived",
        ),
    ],
    ids=["invalid-endpoint", "nothing-arrives"],
)
def test_a_capture_that_gets_nothing_leaves_an_existing_file_alone(
    tmp_path, endpoint, status, why
):
    endpoint = endpoint.replace("FREE", str(free_port()))
    out = tmp_path / "kv.bin"
    out.write_bytes(b"an earlier capture")
    result = harness(
        "capture", "--listen", endpoint, "--out", str(out), "--timeout", "0.3"
    )
    assert result.returncode == status
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: {endpoint}: {why}")
    assert out.read_bytes() == b"an earlier capture"
    assert [path.name for path in tmp_path.iterdir()] == ["kv.bin"]


def test_a_gap_makes_the_capture_incomplete_and_check_stream_sees_it(tmp_path):
    out = tmp_path / "kv.bin"
    result = run_with_publisher(
        ["capture", "--out", str(out), "--max-events", "2", "--timeout", "30"],
        PAYLOADS,
        numbers=[0, 2],
    )
    assert result.returncode == 16, result.stderr
    assert result.stderr.splitlines()[-1].endswith(
        ": incomplete: 1 message(s) missing: message 1"
    )
    assert (tmp_path / "kv.bin.seq").read_text() == "0\n2\n"
    checked = harness("check-stream", str(out))
    assert checked.returncode == 16
    assert (
        checked.stderr == f"error: {out}: incomplete: 1 message(s) missing: message 1\n"
    )


@pytest.mark.parametrize(
    ("signum", "name"),
    [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")],
    ids=["SIGINT", "SIGTERM"],
)
def test_a_stopped_capture_keeps_what_arrived_and_its_summary(tmp_path, signum, name):
    out = tmp_path / "kv.bin"
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness",
            "capture",
            "--listen",
            endpoint,
            "--out",
            str(out),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signal_dispositions,
    )
    stop, thread = start_publisher(endpoint, PAYLOADS)
    try:
        size = len(b"".join(PAYLOADS))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            scratch = [p for p in tmp_path.iterdir() if p.stat().st_size == size]
            if scratch:
                break
            time.sleep(0.02)
        assert scratch, "the capture did not receive the payloads"
        process.send_signal(signum)
        _, err = process.communicate(timeout=30)
    finally:
        stop.set()
        thread.join()
        if process.poll() is None:  # the test failed before it stopped it
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert err.splitlines()[-1] == (
        f"capture: stopped by {name}; wrote 2 batches, 2 events, {size} bytes to "
        f"{out} (sequence numbers in {out}.seq)"
    )
    assert out.read_bytes() == b"".join(PAYLOADS)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["kv.bin", "kv.bin.seq"]
