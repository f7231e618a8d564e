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
