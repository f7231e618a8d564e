import signal
import sys

from harness.errors import STOP_SIGNALS


def _stopped_while_loading(signum, frame):
    """SIGTERM or SIGHUP before the harness's own handlers are in place."""
    print(f"error: {STOP_SIGNALS[signum]}", file=sys.stderr)
    raise SystemExit(128 + signum)


for _signum in (signal.SIGTERM, signal.SIGHUP):
    if signal.getsignal(_signum) == signal.SIG_DFL:
        signal.signal(_signum, _stopped_while_loading)

try:
    from harness.cli import run_as_program
except KeyboardInterrupt:  # Ctrl-C while the harness loads
    print(f"error: {STOP_SIGNALS[signal.SIGINT]}", file=sys.stderr)
    sys.exit(128 + signal.SIGINT)

run_as_program()
