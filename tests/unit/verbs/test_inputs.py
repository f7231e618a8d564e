"""Option values and paths a user can get wrong: each is one line and its
status before any work, and a run that cannot write its files leaves them
as they were."""

import pytest
from support.files import sparse_file

from harness import cli
from harness.errors import OutputError


def usage_error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    [line] = capsys.readouterr().err.splitlines()[-1:]
    return line


@pytest.mark.parametrize("value", ["1e20", "1e306", "1000000001"])
@pytest.mark.parametrize(
    "verb",
    [
        ["check-stream", "--zmq", "tcp://127.0.0.1:9"],
        ["capture", "--zmq", "tcp://127.0.0.1:9", "--out", "kv.bin"],
    ],
    ids=["check-stream", "capture"],
)
def test_a_timeout_too_long_to_wait_for_is_a_usage_error(capsys, verb, value):
    line = usage_error(capsys, [*verb, "--timeout", value])
    assert line.endswith(
        f"argument --timeout: must be at most 1000000000 seconds (about 31 "
        f"years), got {value!r}"
    )


@pytest.mark.parametrize("option", ["--topic", "--zmq"])
@pytest.mark.parametrize("verb", ["check-stream", "capture"])
@pytest.mark.hostile
def test_a_topic_or_endpoint_that_is_not_utf8_is_a_usage_error(
    capsys, tmp_path, verb, option
):
    argv = [verb, "--zmq", "tcp://127.0.0.1:9", "--timeout", "1"]
    if verb == "capture":
        argv += ["--out", str(tmp_path / "kv.bin")]
    line = usage_error(capsys, [*argv, option, "tcp://\udcff"])
    assert line.endswith("not UTF-8 text (byte 0xff at position 7)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--sample-every", "0", "must be at least 1, got 0"),
        ("--seed", str(2**64), f"must be from {-(2**63)} to {2**64 - 1}, got {2**64}"),
        ("--seed", "-" + "9" * 25, f"must be from {-(2**63)} to {2**64 - 1}"),
        ("--ops", "-5", "must be from 0 to 1000000000, got -5"),
        ("--probes", "-1", "must be from 0 to 1000000000, got -1"),
        ("--ops", "ten", "not a whole number: 'ten'"),
    ],
)
def test_a_workload_number_out_of_range_is_a_usage_error(
    capsys, tmp_path, option, value, message
):
    out = tmp_path / "run.rec"
    argv = ["workloads", "--config", "seed-1800", "--out", str(out)]
    line = usage_error(capsys, [*argv, option, value])
    assert message in line
    assert not out.exists()


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--seeds", "-1", "argument --seeds: must be at least 1, got -1"),
        ("--seeds", "0", "argument --seeds: must be at least 1, got 0"),
        ("--ops", "-5", "argument --ops: must be at least 1, got -5"),
        ("--ops", "1.5", "argument --ops: not a whole number: '1.5'"),
    ],
)
def test_a_consumers_count_below_one_is_a_usage_error(
    capsys, tmp_path, monkeypatch, option, value, message
):
    monkeypatch.chdir(tmp_path)
    line = usage_error(capsys, ["consumers", option, value])
    assert line == f"python -m harness consumers: error: {message}"
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    """A `vllm` to import, and a workload that writes its files slowly: the
    run's paths are what is tested, not vLLM."""
    from harness.workloads import workloads

    (tmp_path / "site" / "vllm").mkdir(parents=True)
    (tmp_path / "site" / "vllm" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    runs = []

    def run_workload(config, seed, ops, out, stream, probes):
        runs.append(out)
        out.write_bytes(b"records")
        if stream is not None:
            stream.write_bytes(b"stream")

    monkeypatch.setattr(workloads, "run_workload", run_workload)
    return runs


def workloads_argv(out):
    return ["workloads", "--config", "pool-2x6", "--seed", "1", "--out", str(out)]


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("missing/run.rec", "{out}: {parent} does not exist"),
        ("a-directory", "{out} is a directory; give a file name"),
        ("a-file/run.rec", "{out}: {parent} is not a directory"),
    ],
)
@pytest.mark.hostile
def test_a_workload_out_that_cannot_be_written_is_refused_before_the_work(
    tmp_path, capsys, fake_vllm, where, message
):
    (tmp_path / "a-directory").mkdir()
    (tmp_path / "a-file").write_text("")
    out = tmp_path / where
    assert cli.main(workloads_argv(out)) == OutputError.exit_code
    assert capsys.readouterr().err == (
        "error: " + message.format(out=out, parent=out.parent) + "\n"
    )
    assert fake_vllm == []


@pytest.mark.hostile
def test_a_stream_that_cannot_be_written_leaves_no_record_file(
    tmp_path, capsys, fake_vllm
):
    out = tmp_path / "run.rec"
    stream = "/proc/vllm-kv-series-test.bin"  # writable to access(), not to open()
    assert cli.main([*workloads_argv(out), "--stream", stream]) == 11
    assert capsys.readouterr().err.startswith(f"error: cannot write {out}: ")
    assert fake_vllm == []
    assert sorted(path.name for path in tmp_path.iterdir()) == ["site"]


def test_a_workload_writes_both_files_whole(tmp_path, fake_vllm):
    out, stream = tmp_path / "run.rec", tmp_path / "run.bin"
    assert cli.main([*workloads_argv(out), "--stream", str(stream)]) == 0
    assert (out.read_bytes(), stream.read_bytes()) == (b"records", b"stream")
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "run.bin",
        "run.rec",
        "site",
    ]


def test_a_workload_out_and_stream_naming_one_file_is_a_usage_error(
    tmp_path, capsys, fake_vllm
):
    out = tmp_path / "run.rec"
    line = usage_error(capsys, [*workloads_argv(out), "--stream", str(out)])
    assert line.endswith("--out and --stream name the same file")


def test_capture_refuses_a_sequence_file_that_is_a_directory_before_subscribing(
    tmp_path, capsys
):
    out = tmp_path / "kv.bin"
    (tmp_path / "kv.bin.seq").mkdir()
    argv = ["capture", "--zmq", "tcp://127.0.0.1:9", "--out", str(out)]
    assert cli.main([*argv, "--timeout", "1"]) == OutputError.exit_code
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 'kv.bin.seq'} is a directory; give a file name\n"
    )


@pytest.mark.hostile
def test_a_stream_mixing_none_and_values_for_medium_or_group_is_reported(
    tmp_path, capsys
):
    from support.events import GPU, payload, stored

    capture = tmp_path / "mixed.bin"
    capture.write_bytes(
        payload(
            stored([1], 99, group=0, medium=None),
            stored([2], 98, group=None, medium=GPU),
            stored([3], 97, group=0, medium=GPU),
        )
    )
    assert cli.main(["check-stream", str(capture)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-4:] == [
        "  by view (medium, group, kind): violations at events",
        "    None group 0 (None): C1 1",
        "    GPU group None (None): C1 1",
        "    GPU group 0 (None): C1 1",
    ]


@pytest.mark.hostile
def test_twenty_thousand_views_are_reported_each_once_in_group_order(tmp_path, capsys):
    from support.events import payloads, stored

    capture = tmp_path / "views.bin"
    capture.write_bytes(
        payloads(
            *(
                [stored([n], 10**12 + n, group=n) for n in range(start, start + 1000)]
                for start in range(0, 20_000, 1000)
            )
        )
    )
    assert cli.main(["check-stream", str(capture)]) == 1
    out = capsys.readouterr().out.splitlines()
    views = out[
        out.index("  by view (medium, group, kind): violations at events") + 1 :
    ]
    assert views == [f"    GPU group {n} (None): C1 1" for n in range(20_000)]


def symlink_loop(tmp_path):
    (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")
    (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
    return tmp_path / "loop-a"


@pytest.mark.hostile
def test_a_dest_under_a_symlink_loop_is_one_line(tmp_path, monkeypatch, capsys):
    from support.series import GOOD_PATCHES, GOOD_SERIES, make_series

    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    dest = symlink_loop(tmp_path) / "patched"
    assert cli.main(["apply", "--target", "t", "--dest", str(dest)]) == 11
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot make {dest}: ") and err.count("\n") == 1


@pytest.mark.hostile
def test_a_verdict_that_is_a_symlink_loop_is_unreadable_not_missing(tmp_path, capsys):
    loop = symlink_loop(tmp_path)
    assert cli.main(["ci", "summary", str(loop)]) == 9
    captured = capsys.readouterr()
    assert captured.err == f"error: {loop}: Too many levels of symbolic links\n"
    assert captured.out.startswith(f"Unreadable verdict at `{loop}`")


@pytest.mark.parametrize(
    ("out", "message"),
    [
        ("", ". is a directory; give a file name"),
        (
            "/dev/null",
            "/dev/null is not a regular file (a device, a pipe or a socket), which "
            "the harness would replace; give a file name",
        ),
        ("x" * 300, "File name too long"),
    ],
    ids=["empty", "a-device", "a-name-too-long"],
)
@pytest.mark.hostile
def test_capture_refuses_an_out_it_could_only_destroy_or_never_write(
    tmp_path, monkeypatch, capsys, out, message
):
    monkeypatch.chdir(tmp_path)
    argv = ["capture", "--zmq", "tcp://127.0.0.1:9", "--out", out, "--timeout", "1"]
    assert cli.main(argv) == OutputError.exit_code
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.hostile
def test_a_report_that_never_ends_is_never_read(capsys):
    assert cli.main(["ci", "summary", "/dev/zero"]) == 9
    assert capsys.readouterr().err == (
        "error: /dev/zero: a character device, not a regular file\n"
    )


@pytest.mark.hostile
def test_a_report_larger_than_any_is_read_no_further(tmp_path, capsys):
    huge = sparse_file(tmp_path / "huge.json")
    assert cli.main(["ci", "summary", str(huge)]) == 9
    assert capsys.readouterr().err == (
        f"error: {huge}: larger than 64 MiB, which no report is\n"
    )
