"""One voice for what the harness tells the user while it works.

Progress and warnings go to stderr, so that a verb's stdout holds only its
result (a path, a verdict, a report). A stderr that cannot be written drops
them, never the work (harness.cli's `_ForgivingStderr`). Text the harness
read from a file it does not own (a lock's holder note, a capture's medium)
is printed through `shown`, so that it can say what it holds and nothing
more: no line of its own, no terminal escape.
"""

import shlex
import sys
import unicodedata

# Control characters (C0, DEL, C1), format characters (bidirectional
# overrides, zero widths), line and paragraph separators, and the lone
# surrogates that stand for bytes that were not UTF-8.
_UNSAFE = ("Cc", "Cf", "Zl", "Zp", "Cs")


def shown(text: str) -> str:
    """``text`` safe to print: each character that could add a line, move
    the cursor or recolour the terminal, and the backslash, written as its
    Python escape (``\\x1b``, ``\\n``, ``\\u202e``); the rest as it is."""
    return "".join(
        repr(char)[1:-1]
        if char == "\\" or unicodedata.category(char) in _UNSAFE
        else char
        for char in text
    )


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
