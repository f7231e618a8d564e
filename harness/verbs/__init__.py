"""One module per verb of ``python -m harness``.

Each holds ``register(parser)``, which adds the verb's options and sets
``run``, and ``run(args) -> int``, which asks the core modules for the work,
prints the result and returns the exit status. Heavy or optional imports
happen inside ``run``, so that ``VERB --help`` needs only the standard
library.
"""

import argparse
import math
import os
import stat
from pathlib import Path

from harness.targets import TIERS

# Where the costs each long verb's --help gives were measured.
COST = "measured on a shared 2-core x86_64 machine, the kind CI runs on"
# The longest --timeout a verb takes: about 31 years, so that a poll's
# milliseconds fit in a C long.
MAX_SECONDS = 1e9


def add_target_arguments(
    parser, tier: bool = True, target_default=None, several_tiers: bool = False
) -> None:
    """``--target`` (and ``--tier``, or with ``several_tiers`` a repeatable
    ``--tier`` into ``tiers``), as every verb that works on a target takes
    them."""
    if target_default is None:
        parser.add_argument("--target", required=True, help="a target of targets.toml")
    else:
        parser.add_argument(
            "--target",
            default=target_default,
            help=f"a target of targets.toml (default {target_default})",
        )
    if several_tiers:
        parser.add_argument(
            "--tier",
            dest="tiers",
            action="append",
            choices=TIERS,
            help="repeat for several (default: default and strict)",
        )
    elif tier:
        parser.add_argument("--tier", choices=TIERS, default="default")


def python_path(text: str) -> str:
    """A ``--python`` as given: a path with a slash taken from the working
    directory, as a shell takes it (the probes run it from elsewhere), a
    bare name looked up on PATH when it is run."""
    import argparse
    import os

    if os.sep not in text:
        return text
    try:
        return os.path.abspath(text)
    except OSError as exc:
        raise argparse.ArgumentTypeError(
            f"{text} is relative, and the working directory cannot be read "
            f"({exc.strerror}); give an absolute path"
        ) from None


def add_python_argument(parser) -> None:
    """``--python``: the interpreter whose installed vllm a verb works on."""
    import sys

    parser.add_argument(
        "--python",
        type=python_path,
        default=sys.executable,
        metavar="PATH",
        help="the Python of the environment whose vllm to use (default: the "
        "one running the harness, " + sys.executable + ")",
    )


def add_subscription_arguments(parser, required: bool) -> None:
    """``--zmq`` (connect) or ``--listen`` (bind), and ``--topic``: how the
    verbs that subscribe reach an engine's KV-event publisher."""
    where = parser.add_mutually_exclusive_group(required=required)
    where.add_argument(
        "--zmq",
        type=utf8_text,
        metavar="ENDPOINT",
        help="connect to the engine's publisher: tcp://HOST:PORT for an engine "
        "whose kv_events_config endpoint binds (vLLM's default, tcp://*:5557: "
        "--zmq tcp://ENGINE-HOST:5557; tcp://*:PORT means this host), or its "
        "ipc:// endpoint",
    )
    where.add_argument(
        "--listen",
        type=utf8_text,
        metavar="ENDPOINT",
        help="bind ENDPOINT and wait for the engine to connect, for one whose "
        "kv_events_config endpoint is tcp://THIS-HOST:PORT (vLLM connects to "
        "an endpoint without a wildcard)",
    )
    parser.add_argument(
        "--topic",
        default="",
        type=utf8_text,
        metavar="T",
        help="ZMQ topic prefix (default: all)",
    )


def subscription_endpoint(args) -> tuple[str, bool]:
    """(endpoint, whether to bind it) from ``--zmq`` or ``--listen``."""
    return (args.listen, True) if args.listen else (args.zmq, False)


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (--max-events)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0 (--timeout)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(
            f"must be a finite number of seconds above 0, got {text!r}"
        )
    if value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"must be at most {MAX_SECONDS:.0f} seconds (about 31 years), got {text!r}"
        )
    return value


def whole_number(low: int, high: int):
    """An argparse type: a whole number from low to high (--seed, --ops)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"must be from {low} to {high}, got {text if len(text) < 30 else '...'}"
            )
        return value

    return parse


def utf8_text(text: str) -> str:
    """An argparse type: text that is UTF-8 (a topic, an endpoint), which
    argv need not be."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise argparse.ArgumentTypeError(
            f"not UTF-8 text (byte 0x{ord(text[exc.start]) & 0xFF:02x} at position "
            f"{exc.start + 1})"
        ) from None
    return text


def writable_file(path: Path) -> str | None:
    """Why ``path`` cannot be written as a new file, or replaced by one (a
    directory, a device or a pipe, in a directory that is missing, not a
    directory or not writable, a name too long), else None: checked before
    any work, so that the work is not lost at the end. A path inside the
    harness cache's trees is refused too (`cache.outside_trees`)."""
    from harness import cache

    if (problem := cache.in_trees(path)) is not None:
        return problem
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        info = None  # the parent says why
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    if info is not None:
        if os.path.isdir(path):
            return f"{path} is a directory; give a file name"
        if not stat.S_ISREG(info.st_mode) and not stat.S_ISLNK(info.st_mode):
            return (
                f"{path} is not a regular file (a device, a pipe or a socket), "
                f"which the harness would replace; give a file name"
            )
    parent = path.parent
    if not parent.is_dir():
        problem = "is not a directory" if parent.exists() else "does not exist"
        return f"{path}: {parent} {problem}"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{path}: {parent} is not writable"
    if len(os.fsencode(path.name)) > os.pathconf(parent, "PC_NAME_MAX"):
        return f"{path}: the name is longer than {parent} allows"
    return None
