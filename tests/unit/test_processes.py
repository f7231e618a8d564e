"""Children started by harness.processes end with the harness."""

import os
import signal
import subprocess
import sys

import pytest
from support import REPO_ROOT
from support.stopping import (
    WAITING_TOOL,
    default_signal_dispositions,
    end_group,
    is_running,
    wait_for,
)

# A harness stand-in: stop signals handled as the CLI handles them, then a
# child run to its end with processes.call.
CALLER = """
import subprocess
import sys
import time
from harness import processes
if {slow_start}:
    # A loaded machine: the child runs before its start has returned.
    class SlowPopen(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            time.sleep(2)
    subprocess.Popen = SlowPopen
from harness.errors import Stopped
processes.handle_stop_signals()
try:
    processes.call([{tool!r}])
except (Stopped, KeyboardInterrupt):
    sys.exit(3)
"""


@pytest.mark.parametrize("slow_start", [False, True], ids=["started", "starting"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
@pytest.mark.hostile
def test_a_called_child_is_ended_with_the_harness(tmp_path, signum, slow_start):
    tool = tmp_path / "waiting-tool"
    tool.write_text(WAITING_TOOL)
    tool.chmod(0o755)
    ready, pid_file = tmp_path / "ready", tmp_path / "pid"
    caller = subprocess.Popen(
        [sys.executable, "-c", CALLER.format(tool=str(tool), slow_start=slow_start)],
        cwd=REPO_ROOT,
        env={
            **os.environ,
            "PYTHONPATH": str(REPO_ROOT),
            "HARNESS_TEST_READY": str(ready),
            "HARNESS_TEST_PID": str(pid_file),
        },
        preexec_fn=default_signal_dispositions,
    )
    wait_for(ready, caller)
    tool_pid = int(pid_file.read_text())
    try:
        caller.send_signal(signum)
        assert caller.wait(timeout=60) == 3
        assert not is_running(tool_pid), "the child outlived the harness"
    finally:
        end_group(tool_pid)


def test_a_called_childs_exit_status_is_returned(tmp_path):
    from harness import processes

    assert processes.call([sys.executable, "-c", "raise SystemExit(7)"]) == 7


@pytest.mark.parametrize(
    ("stdout", "stderr", "said"),
    [
        ("", "first\nTypeError: bad\n", "TypeError: bad"),
        ("only stdout\n", "", "only stdout"),
        ("", "", "exit status 5"),
    ],
)
def test_a_failed_childs_last_words(stdout, stderr, said):
    from harness import processes

    command = [
        sys.executable,
        "-c",
        f"import sys; sys.stdout.write({stdout!r}); sys.stderr.write({stderr!r}); "
        "sys.exit(5)",
    ]
    assert processes.last_words(processes.run(command)) == said


def test_a_bounded_childs_output_and_status_are_returned():
    from harness import processes

    result = processes.run_bounded(
        [sys.executable, "-c", "import sys; print('out'); sys.exit(3)"],
        timeout_s=60,
        max_bytes=100,
    )
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "")


@pytest.mark.hostile
def test_a_bounded_child_that_never_ends_is_ended_with_its_group(tmp_path):
    import time

    from harness import processes

    pid_file = tmp_path / "pid"
    script = (
        "import os, subprocess, sys, time\n"
        "sleeper = [sys.executable, '-c', 'import time; time.sleep(600)']\n"
        "child = subprocess.Popen(sleeper)\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(600)\n"
    )
    started = time.monotonic()
    with pytest.raises(processes.BoundExceeded) as ended:
        processes.run_bounded(
            [sys.executable, "-c", script], timeout_s=2, max_bytes=100
        )
    assert time.monotonic() - started < 30
    assert (
        str(ended.value) == f"{sys.executable} did not finish within 2 s; it was ended"
    )
    assert ended.value.bound == "time"
    grandchild = int(pid_file.read_text())
    try:
        assert wait_until_gone(grandchild), "the child's child outlived the bound"
    finally:
        end_group(grandchild)


def wait_until_gone(pid: int) -> bool:
    import time

    for _ in range(100):
        if not is_running(pid):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
@pytest.mark.hostile
def test_a_bounded_child_that_floods_is_ended_at_the_cap(stream):
    """It would write 400 MB; it is ended after 1 MiB, in a moment."""
    import time

    from harness import processes

    script = (
        f"import sys\nfor _ in range(400):\n    sys.{stream}.write('x' * (1 << 20))\n"
    )
    started = time.monotonic()
    with pytest.raises(processes.BoundExceeded) as ended:
        processes.run_bounded(
            [sys.executable, "-c", script], timeout_s=60, max_bytes=1 << 20
        )
    assert time.monotonic() - started < 30
    assert str(ended.value) == (
        f"{sys.executable} wrote more than 1048576 bytes on {stream}; it was ended"
    )
    assert ended.value.bound == stream


@pytest.mark.hostile
def test_a_bounded_child_past_its_memory_fails_to_allocate_and_says_so():
    """It would take 2 GiB at once; bounded to 256 MiB, it cannot."""
    from harness import processes

    script = "x = bytearray(2 << 30)\nprint('allocated')\n"
    with pytest.raises(processes.BoundExceeded) as ended:
        processes.run_bounded(
            [sys.executable, "-c", script],
            timeout_s=60,
            max_bytes=1 << 20,
            max_memory=256 << 20,
        )
    assert str(ended.value) == (
        f"{sys.executable} needed more than the 256 MiB of memory it may use; it "
        f"ended with MemoryError"
    )
    assert ended.value.bound == "memory"


def test_a_bounded_child_within_its_memory_runs_as_any_other():
    from harness import processes

    script = "x = bytearray(64 << 20)\nprint(len(x))\n"
    result = processes.run_bounded(
        [sys.executable, "-c", script],
        timeout_s=60,
        max_bytes=100,
        max_memory=512 << 20,
    )
    assert (result.returncode, result.stdout) == (0, f"{64 << 20}\n")


@pytest.mark.hostile
def test_a_bounded_child_that_ends_but_leaves_its_output_open_is_bounded():
    """A child whose own child keeps stdout open: the wait is bounded too."""
    from harness import processes

    script = (
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    )
    with pytest.raises(processes.BoundExceeded, match="did not finish within 2 s"):
        processes.run_bounded(
            [sys.executable, "-c", script], timeout_s=2, max_bytes=100
        )
