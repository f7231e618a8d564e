"""Run the harness in a child process and stop it at a known point.

The child is ``python -c`` with a prelude (patching what the test needs, such
as the checkout the harness works on) before ``harness.cli.main``. A test
waits for a file that the child makes when it reaches the point to stop at
(a stand-in tool on PATH that writes it and then waits, say), then sends the
signal.
"""

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support import REPO_ROOT

# A stand-in for a tool the harness runs: it notes its pid in $HARNESS_TEST_PID,
# says it has started by making $HARNESS_TEST_READY, then waits to be ended.
WAITING_TOOL = """\
#!/bin/sh
echo $$ > "$HARNESS_TEST_PID"
touch "$HARNESS_TEST_READY"
exec sleep 120
"""


def default_signal_dispositions() -> None:
    """Run in a child before it starts: the signals these tests send act as
    they do under a terminal, even when the suite was started with them
    ignored (under ``nohup``, or as a background job of a script), which a
    child would otherwise inherit."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def start_harness(args, prelude: str = "", env=None) -> subprocess.Popen:
    script = (
        f"{prelude}\nimport sys\nfrom harness.cli import main\n"
        f"sys.exit(main({args!r}))\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signal_dispositions,
    )


def checkout_prelude(root: Path) -> str:
    """Make ``root`` (a tmp dir with harness/targets.toml) the checkout."""
    return (
        "from pathlib import Path\n"
        "from harness import checkout\n"
        f"checkout.root = lambda: Path({str(root)!r})\n"
    )


def wait_for(path: Path, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None:
            out, err = process.communicate()
            raise AssertionError(f"the harness ended first:\n{out}\n{err}")
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"{path} did not appear in {timeout} s")
        time.sleep(0.02)


def stop(process: subprocess.Popen, signum: int) -> subprocess.CompletedProcess:
    """Send ``signum``; the harness's exit status and output."""
    process.send_signal(signum)
    out, err = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def is_running(pid: int) -> bool:
    """Whether ``pid`` is a live process (not a zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def end_group(pid: int) -> None:
    """Clean up after a test that SIGKILLed the harness: end its child."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
