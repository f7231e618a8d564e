"""The check-stream verb, run as users run it."""

import msgpack
import msgspec
import pytest
from support.cli import harness, said
from support.events import payload, removed, stored
from support.publisher import free_port, run_with_publisher

from harness.errors import IncompleteStream, UnreadableStream


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


def test_violations_are_counted_per_view_when_there_are_several(tmp_path):
    data = payload(
        stored([1], None, group=0, kind="full_attention"),
        stored([2], None, group=1, kind="mamba"),
        stored([4], 3, group=1, kind="mamba"),
        stored([5], 3, group=1, tokens=[1], kind="mamba"),
    )
    result = harness("check-stream", write(tmp_path, data))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    at = lines.index("  by view (medium, group, kind): violations at events")
    assert lines[at + 1 :] == [
        "    GPU group 0 (full_attention): none",
        "    GPU group 1 (mamba): C1 2, C3 1",
    ]


@pytest.mark.hostile
def test_a_medium_or_kind_with_escapes_is_shown_without_them(tmp_path):
    data = payload(
        stored([1], None, group=0, medium="\x1b[2K\rGPU", kind="a\nFAKE: 0"),
        stored([2], None, group=1, kind="mamba"),
    )
    result = harness("check-stream", write(tmp_path, data))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    at = lines.index("  by view (medium, group, kind): violations at events")
    assert lines[at + 1 :] == [
        "    \\x1b[2K\\rGPU group 0 (a\\nFAKE: 0): none",
        "    GPU group 1 (mamba): none",
    ]


@pytest.mark.hostile
def test_truncated_file_is_one_error_line_naming_the_offset(tmp_path):
    first = payload(stored([1], None))
    path = write(tmp_path, first + payload(stored([2], 1))[:-4])
    result = harness("check-stream", path)
    assert result.returncode == UnreadableStream.exit_code
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {path}: unreadable at byte {len(first)}:")


@pytest.mark.hostile
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


@pytest.mark.hostile
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
    assert result.stdout.startswith("tcp://127.0.0.1:")
    assert (
        ": 2 batches, 3 events, 0 stores of an already-live hash, 1 violations\n"
    ) in result.stdout
    assert "  C1 parent closure: 1\n" in result.stdout
    assert "incomplete" not in result.stdout + result.stderr


def test_an_empty_file_is_incomplete_not_clean(tmp_path):
    path = write(tmp_path, b"")
    result = harness("check-stream", path)
    assert result.returncode == IncompleteStream.exit_code == 16
    assert result.stderr == (
        f"error: {path}: incomplete: empty: no KVEventBatch in it\n"
    )
    assert "  incomplete: empty: no KVEventBatch in it\n" in result.stdout


def test_a_subscription_that_receives_nothing_is_incomplete():
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    result = harness("check-stream", "--zmq", endpoint, "--timeout", "0.3")
    assert result.returncode == 16
    assert result.stderr == (
        f"harness: check-stream: subscribed to {endpoint} (connected to the "
        f"engine's publisher), every topic\n"
        f"error: {endpoint}: incomplete: no message arrived in 0.3 s\n"
    )


@pytest.mark.parametrize(
    ("numbers", "missing"),
    [
        ([0, 1, 3], "1 message(s) missing: message 2"),
        (
            [5, 6, 7],
            "joined at message 5 (messages 0-4 were sent before the subscription "
            "started), and no AllBlocksCleared followed to start from: nothing "
            "checked. Give --replay the engine's replay_endpoint, or reset its "
            "prefix cache while checking (POST /reset_prefix_cache, with "
            "VLLM_SERVER_DEV_MODE=1)",
        ),
        (
            [0, 1, 0],
            "0 message(s) missing: the sequence went back from 1 to 0 "
            "(a restarted publisher?)",
        ),
    ],
    ids=["dropped", "joined-late", "restarted"],
)
def test_a_live_sequence_gap_is_incomplete(numbers, missing):
    payloads = [payload(stored([n], None)) for n in (1, 2, 3)]
    result = run_with_publisher(
        ["check-stream", "--max-events", "3", "--timeout", "30"], payloads, numbers
    )
    assert result.returncode == 16, result.stderr
    [line] = said(result.stderr)
    assert line.startswith("error: tcp://127.0.0.1:")
    assert line.endswith(f": incomplete: {missing}")
    assert f"  incomplete: {missing}\n" in result.stdout
    assert result.stdout.splitlines()[0].endswith(", 0 violations")


@pytest.mark.parametrize("verb", ["check-stream", "capture"])
@pytest.mark.parametrize(
    ("option", "value", "why"),
    [
        ("--max-events", "0", "must be at least 1, got 0"),
        ("--max-events", "-3", "must be at least 1, got -3"),
        ("--timeout", "-1", "must be a finite number of seconds above 0, got '-1'"),
        ("--timeout", "0", "must be a finite number of seconds above 0, got '0'"),
        ("--timeout", "nan", "must be a finite number of seconds above 0, got 'nan'"),
        ("--timeout", "inf", "must be a finite number of seconds above 0, got 'inf'"),
    ],
)
def test_limits_that_would_check_nothing_are_usage_errors(
    tmp_path, verb, option, value, why
):
    out = ["--out", str(tmp_path / "kv.bin")] if verb == "capture" else []
    result = harness(verb, "--zmq", "tcp://127.0.0.1:9", *out, option, value)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"python -m harness {verb}: error: argument {option}: {why}"
    )
    assert not (tmp_path / "kv.bin").exists()


@pytest.mark.hostile
def test_deep_msgpack_nesting_is_unreadable_not_a_crash(tmp_path):
    path = write(tmp_path, b"\x91" * 100_000 + b"\xc0")
    result = harness("check-stream", path)
    assert result.returncode == UnreadableStream.exit_code
    assert result.stderr == (
        f"error: {path}: unreadable at byte 0: msgpack nested deeper than any "
        f"KVEventBatch\n"
    )


@pytest.mark.hostile
def test_deep_nesting_inside_a_field_is_unreadable_not_a_crash(tmp_path):
    event = {
        "type": "BlockStored",
        "block_hashes": [1],
        "parent_block_hash": None,
        "token_ids": [0, 1],
        "block_size": 2,
        "lora_id": None,
        "medium": "GPU",
        "lora_name": None,
        "extra_keys": "NESTED",
    }
    nested = b"\x91" * 1010 + b"\xc0"
    data = msgpack.packb([0.0, [event]]).replace(msgpack.packb("NESTED"), nested)
    path = write(tmp_path, data)
    result = harness("check-stream", path)
    assert result.returncode == UnreadableStream.exit_code
    assert result.stderr == (
        f"error: {path}: unreadable at byte 0: not a KVEventBatch: nested deeper "
        f"than Python can decode\n"
    )


@pytest.mark.hostile
def test_an_endless_input_is_read_as_a_stream(tmp_path):
    # /dev/zero is a msgpack 0 per byte: the first is refused at once, where
    # reading it whole first would never end.
    result = harness("check-stream", "/dev/zero")
    assert result.returncode == UnreadableStream.exit_code
    assert result.stderr.startswith(
        "error: /dev/zero: unreadable at byte 0: not a KVEventBatch: Expected `array`"
    )


@pytest.mark.hostile
def test_one_unreadable_file_does_not_drop_the_others_reports(tmp_path):
    clean = tmp_path / "clean.bin"
    clean.write_bytes(payload(stored([1], None)))
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"\xc1")
    violating = tmp_path / "violating.bin"
    violating.write_bytes(payload(stored([2], 1)))
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    result = harness("check-stream", str(clean), str(bad), str(violating), str(empty))
    assert result.returncode == UnreadableStream.exit_code
    assert f"{clean}: 1 batches, 1 events" in result.stdout
    assert f"{violating}: 1 batches, 1 events" in result.stdout
    assert f"{empty}: 0 batches" in result.stdout
    assert result.stderr.splitlines() == [
        f"error: {bad}: unreadable at byte 0: not msgpack: a byte that starts no "
        f"msgpack object",
        f"error: {empty}: incomplete: empty: no KVEventBatch in it",
    ]
    without_bad = harness("check-stream", str(clean), str(violating), str(empty))
    assert without_bad.returncode == IncompleteStream.exit_code
    assert harness("check-stream", str(clean), str(violating)).returncode == 1


def test_a_gap_in_a_captures_sequence_numbers_is_incomplete(tmp_path):
    path = write(tmp_path, payload(stored([1], None)) + payload(stored([2], 1)))
    (tmp_path / "stream.bin.seq").write_text("0\n2\n")
    result = harness("check-stream", path)
    assert result.returncode == 16
    assert result.stderr == (
        f"error: {path}: incomplete: 1 message(s) missing: message 1\n"
    )
    (tmp_path / "stream.bin.seq").write_text("0\n1\n")
    assert harness("check-stream", path).returncode == 0


@pytest.mark.hostile
def test_sequence_numbers_that_do_not_match_the_capture_are_unreadable(tmp_path):
    path = write(tmp_path, payload(stored([1], None)))
    (tmp_path / "stream.bin.seq").write_text("0\n1\n")
    result = harness("check-stream", path)
    assert result.returncode == UnreadableStream.exit_code
    assert result.stderr == (
        f"error: {path}.seq: more than 1 sequence number(s) for the 1 payload(s) of "
        f"{path}; they do not belong together\n"
    )


@pytest.mark.parametrize(
    ("numbers", "line"),
    [
        ("-5\n-4\n", "1: not a sequence number (0 to 2**64 - 1): b'-5\\n'"),
        (f"0\n{2**64}\n", f"2: not a sequence number (0 to 2**64 - 1): b'{2**64}\\n'"),
        ("0\nzero\n", "2: not a sequence number (0 to 2**64 - 1): b'zero\\n'"),
    ],
    ids=["negative", "over-8-bytes", "a-word"],
)
@pytest.mark.hostile
def test_a_sequence_number_no_publisher_sends_is_unreadable(
    tmp_path, capsys, numbers, line
):
    from support.digest import changed, tree_digest

    from harness import cli

    path = write(tmp_path, payload(stored([1], None)) + payload(stored([2], 1)))
    (tmp_path / "stream.bin.seq").write_text(numbers)
    before = tree_digest(tmp_path)
    assert cli.main(["check-stream", path]) == UnreadableStream.exit_code
    assert capsys.readouterr().err == f"error: {path}.seq:{line}\n"
    assert changed(before, tree_digest(tmp_path)) == []


@pytest.mark.parametrize("kind", ["directory", "dangling-link"])
@pytest.mark.hostile
def test_a_sequence_file_that_is_not_a_file_is_unreadable_not_ignored(
    tmp_path, capsys, kind
):
    from harness import cli

    path = write(tmp_path, payload(stored([1], None)))
    if kind == "directory":
        (tmp_path / "stream.bin.seq").mkdir()
    else:
        (tmp_path / "stream.bin.seq").symlink_to(tmp_path / "nowhere")
    assert cli.main(["check-stream", path]) == UnreadableStream.exit_code
    assert capsys.readouterr().err == (
        f"error: {path}.seq is not a file (a directory, a device, a pipe, or a "
        f"dangling link), so the sequence numbers of {path} cannot be read; move "
        f"it away to check {path} without them\n"
    )


@pytest.mark.hostile
def test_a_sequence_file_of_one_endless_line_is_read_no_further(tmp_path, capsys):
    from support.files import sparse_file

    from harness import cli

    path = write(tmp_path, payload(stored([1], None)))
    sparse_file(tmp_path / "stream.bin.seq")
    assert cli.main(["check-stream", path]) == UnreadableStream.exit_code
    assert capsys.readouterr().err == (
        f"error: {path}.seq: line 1 is longer than 64 bytes\n"
    )


@pytest.mark.hostile
def test_a_sequence_file_is_read_no_further_than_its_capture_needs(
    tmp_path, capsys, monkeypatch
):
    from harness import cli, reading

    lines_read = []
    real = reading.bounded_lines

    def counted(stream, longest, most):
        for line in real(stream, longest, most):
            lines_read.append(line)
            yield line

    monkeypatch.setattr("harness.contract.subscribe.bounded_lines", counted)
    path = write(tmp_path, payload(stored([1], None)) + payload(stored([2], 1)))
    (tmp_path / "stream.bin.seq").write_text("".join(f"{n}\n" for n in range(1000)))
    assert cli.main(["check-stream", path]) == UnreadableStream.exit_code
    assert capsys.readouterr().err == (
        f"error: {path}.seq: more than 2 sequence number(s) for the 2 payload(s) "
        f"of {path}; they do not belong together\n"
    )
    assert len(lines_read) == 3


@pytest.mark.hostile
def test_witnesses_are_bounded_and_every_violation_counted(tmp_path):
    events = [stored([n], 10**6 + n) for n in range(2000)]
    result = harness("check-stream", write(tmp_path, payload(*events)))
    assert result.returncode == 1
    assert "1 batches, 2000 events, 0 stores of an already-live hash, 2000 " in (
        result.stdout
    )
    assert "  C1 parent closure: 2000\n" in result.stdout
    assert result.stdout.count("    C1 at batch 0 event ") == 5
    assert "    ... 1995 more\n" in result.stdout


def test_a_port_out_of_range_is_one_line():
    result = harness("check-stream", "--zmq", "tcp://127.0.0.1:99999", "--timeout", "1")
    assert result.returncode == 10
    assert result.stderr == (
        "error: tcp://127.0.0.1:99999: port 99999 is not 1-65535\n"
    )
