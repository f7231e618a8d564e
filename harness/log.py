"""One voice for what the harness tells the user while it works.

Progress and warnings go to stderr, so that a verb's stdout holds only its
result (a path, a verdict, a report).
"""

import shlex
import sys


def progress(message: str) -> None:
    """A step the harness is taking: ``harness: message``."""
    print(f"harness: {message}", file=sys.stderr, flush=True)


def warning(message: str) -> None:
    """Something the user should look at that does not stop the verb."""
    print(f"warning: {message}", file=sys.stderr, flush=True)


def error(message: str) -> None:
    """The one line an error ends a verb with (harness.cli.main prints it)."""
    print(f"error: {message}", file=sys.stderr, flush=True)


def harness_command(*words: str) -> str:
    """A harness command line to paste, naming the interpreter that runs the
    harness now: a bare ``python`` may be another environment's."""
    return shlex.join([sys.executable, "-m", "harness", *words])
