import os
import signal
import sys

from harness.errors import STOP_SIGNALS


def _say(line: str) -> None:
    """An error line on stderr; one that cannot be written is dropped (with
    stderr pointed at /dev/null, so that the exit does not fail on it)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)


def _stopped_while_loading(signum, frame):
    """SIGTERM or SIGHUP before the harness's own handlers are in place."""
    _say(f"error: {STOP_SIGNALS[signum]}")
    raise SystemExit(128 + signum)


for _signum in (signal.SIGTERM, signal.SIGHUP):
    if signal.getsignal(_signum) == signal.SIG_DFL:
        signal.signal(_signum, _stopped_while_loading)

try:
    from harness.cli import run_as_program
except KeyboardInterrupt:  # Ctrl-C while the harness loads
    _say(f"error: {STOP_SIGNALS[signal.SIGINT]}")
    sys.exit(128 + signal.SIGINT)

run_as_program()
