"""The check-stream verb, run as users run it."""

import subprocess
import sys

import msgspec
from support import REPO_ROOT
from support.events import payload, removed, stored
from support.publisher import run_with_publisher

from harness.errors import UnreadableStream


def harness(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def write(tmp_path, data: bytes) -> str:
    path = tmp_path / "stream.bin"
    path.write_bytes(data)
    return str(path)


def test_clean_stream_exits_0(tmp_path):
    data = payload(stored([1], None), stored([2], 1)) + payload(removed([2, 1]))
    result = harness("check-stream", "--expect-empty", write(tmp_path, data))
    assert result.returncode == 0, result.stderr
    assert "2 batches, 3 events" in result.stdout
    assert "0 violations" in result.stdout


def test_violations_exit_1_with_a_report_per_rule(tmp_path):
    data = payload(stored([2], 1)) + payload(removed([5]))
    result = harness("check-stream", write(tmp_path, data))
    assert result.returncode == 1
    assert "  C1 parent closure: 1" in result.stdout
    assert "  C2 removal soundness: 1" in result.stdout
    assert "C1 at batch 0 event 0: parent is not live" in result.stdout


def test_truncated_file_is_one_error_line_naming_the_offset(tmp_path):
    first = payload(stored([1], None))
    path = write(tmp_path, first + payload(stored([2], 1))[:-4])
    result = harness("check-stream", path)
    assert result.returncode == UnreadableStream.exit_code
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {path}: unreadable at byte {len(first)}:")


def test_unknown_tag_is_one_error_line(tmp_path):
    class BlockMoved(msgspec.Struct, tag=True):
        block_hashes: list[int]

    class FutureBatch(msgspec.Struct, array_like=True):
        ts: float
        events: list[BlockMoved]

    data = msgspec.msgpack.encode(FutureBatch(0.0, [BlockMoved([3])]))
    path = write(tmp_path, data)
    result = harness("check-stream", path)
    assert result.returncode == UnreadableStream.exit_code
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: {path}: unreadable at byte 0:")
    assert "BlockMoved" in line


def test_garbage_is_one_error_line(tmp_path):
    path = write(tmp_path, b"\xc1garbage")
    result = harness("check-stream", path)
    assert result.returncode == UnreadableStream.exit_code
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: {path}: unreadable at byte 0:")


def test_missing_file_is_one_error_line(tmp_path):
    result = harness("check-stream", str(tmp_path / "absent.bin"))
    assert result.returncode == UnreadableStream.exit_code
    assert len(result.stderr.splitlines()) == 1


def test_check_stream_subscribes_live(tmp_path):
    payloads = [payload(stored([1], None)), payload(stored([2], 1), stored([4], 3))]
    result = run_with_publisher(
        ["check-stream", "--max-events", "3", "--timeout", "30"], payloads
    )
    assert result.returncode == 1, result.stderr
    assert "  C1 parent closure: " in result.stdout
