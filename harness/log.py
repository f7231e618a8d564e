"""One voice for what the harness tells the user while it works.

Progress and warnings go to stderr, so that a verb's stdout holds only its
result (a path, a verdict, a report). A stderr that cannot be written drops
them, never the work (harness.cli's `_ForgivingStderr`).
"""

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
