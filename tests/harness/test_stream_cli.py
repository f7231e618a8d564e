"""The check-stream and capture verbs, run as users run them."""

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgspec
import zmq

from harness.stream import BlockRemoved, BlockStored, KVEventBatch

REPO = Path(__file__).resolve().parents[2]


def stored(hashes, parent):
    return BlockStored(
        block_hashes=hashes,
        parent_block_hash=parent,
        token_ids=list(range(2 * len(hashes))),
        block_size=2,
        lora_id=None,
        medium="GPU",
        lora_name=None,
        group_idx=0,
    )


def payload(*events) -> bytes:
    return msgspec.msgpack.encode(KVEventBatch(ts=0.0, events=list(events)))


def harness(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def write(tmp_path, data: bytes) -> str:
    path = tmp_path / "stream.bin"
    path.write_bytes(data)
    return str(path)


def test_clean_stream_exits_0(tmp_path):
    data = payload(stored([1], None), stored([2], 1)) + payload(
        BlockRemoved(block_hashes=[2, 1], medium="GPU", group_idx=0)
    )
    result = harness("check-stream", "--expect-empty", write(tmp_path, data))
    assert result.returncode == 0, result.stderr
    assert "2 batches, 3 events" in result.stdout
    assert "0 violations" in result.stdout


def test_violations_exit_1_with_a_report_per_rule(tmp_path):
    data = payload(stored([2], 1)) + payload(
        BlockRemoved(block_hashes=[5], medium="GPU", group_idx=0)
    )
    result = harness("check-stream", write(tmp_path, data))
    assert result.returncode == 1
    assert "  C1: 1" in result.stdout
    assert "  C2: 1" in result.stdout
    assert "C1 at batch 0 event 0: parent is not live" in result.stdout


def test_truncated_file_exits_2_with_one_line_naming_the_offset(tmp_path):
    first = payload(stored([1], None))
    path = write(tmp_path, first + payload(stored([2], 1))[:-4])
    result = harness("check-stream", path)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"{path}: unreadable at byte {len(first)}:")


def test_unknown_tag_exits_2_with_one_line(tmp_path):
    class BlockMoved(msgspec.Struct, tag=True):
        block_hashes: list[int]

    class FutureBatch(msgspec.Struct, array_like=True):
        ts: float
        events: list[BlockMoved]

    data = msgspec.msgpack.encode(FutureBatch(0.0, [BlockMoved([3])]))
    path = write(tmp_path, data)
    result = harness("check-stream", path)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{path}: unreadable at byte 0:")
    assert "BlockMoved" in line


def test_garbage_exits_2_with_one_line(tmp_path):
    path = write(tmp_path, b"\xc1garbage")
    result = harness("check-stream", path)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{path}: unreadable at byte 0:")


def test_missing_file_exits_2_with_one_line(tmp_path):
    result = harness("check-stream", str(tmp_path / "absent.bin"))
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def publish_like_vllm(endpoint: str, payloads: list[bytes], stop: threading.Event):
    """A PUB socket that connects, as vLLM's publisher does for tcp://HOST:PORT.

    PUB drops messages until the subscriber is attached, so it repeats the
    sequence (restarting the sequence numbers) until told to stop.
    """
    publisher = zmq.Context.instance().socket(zmq.PUB)
    publisher.setsockopt(zmq.LINGER, 0)
    publisher.connect(endpoint)
    while not stop.is_set():
        for seq, data in enumerate(payloads):
            publisher.send_multipart((b"kv", seq.to_bytes(8, "big"), data))
        time.sleep(0.05)
    publisher.close()


def run_with_publisher(args, payloads) -> subprocess.CompletedProcess:
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    stop = threading.Event()
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", *args, "--zmq", endpoint],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)  # let the subscriber bind
    thread = threading.Thread(target=publish_like_vllm, args=(endpoint, payloads, stop))
    thread.start()
    try:
        stdout, stderr = process.communicate(timeout=60)
    finally:
        stop.set()
        thread.join()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def test_capture_writes_payloads_back_to_back(tmp_path):
    out = tmp_path / "captured.bin"
    payloads = [payload(stored([1], None)), payload(stored([2], 1))]
    result = run_with_publisher(
        ["capture", "--out", str(out), "--max-events", "2", "--timeout", "30"],
        payloads,
    )
    assert result.returncode == 0, result.stderr
    assert "2 events" in result.stderr
    assert out.read_bytes() in {payloads[0] + payloads[1], payloads[1] + payloads[0]}


def test_check_stream_subscribes_live(tmp_path):
    payloads = [payload(stored([1], None)), payload(stored([2], 1), stored([4], 3))]
    result = run_with_publisher(
        ["check-stream", "--max-events", "3", "--timeout", "30"], payloads
    )
    assert result.returncode == 1, result.stderr
    assert "C1: " in result.stdout
