"""The command line: ``python -m harness VERB ...`` (or ``vllm-kv-series VERB``).

`VERBS` names every verb, the module that holds it and its one-line help, so
``--help`` lists them without importing any: it needs only the standard
library. Only the verb asked for is imported; its module's
``register(parser)`` adds the options and sets ``run``, which takes the
parsed arguments and returns the exit status. Errors a user can act on
(harness.errors) are caught here, once, and end the verb with one line and
the error's own exit code.
"""

import argparse
import codecs
import contextlib
import importlib
import io
import os
import signal
import sys
import traceback

from harness.errors import (
    INTERNAL_ERROR,
    STOP_SIGNALS,
    OutputError,
    Stopped,
    UserError,
    excerpt,
    exit_codes,
)
from harness.log import error
from harness.processes import handle_stop_signals, restore_handlers

# Verb -> (module, help), in the order `--help` lists them.
VERBS = {
    "targets": ("harness.verbs.targets", "list the pinned vLLM targets"),
    "fetch": (
        "harness.verbs.fetch",
        "fetch a target's pristine tree into the cache, print its path",
    ),
    "deps": (
        "harness.verbs.deps",
        "pip install what a target's upstream tests import (torch held at 2.13.0)",
    ),
    "apply": (
        "harness.verbs.apply",
        "apply a target's series to a fresh tree or onto a checkout",
    ),
    "install": (
        "harness.verbs.install",
        "put a target's tier on the vLLM installed in a Python environment",
    ),
    "status": (
        "harness.verbs.status",
        "which tier of the series is on an installed vLLM, file by file",
    ),
    "uninstall": (
        "harness.verbs.uninstall",
        "take the series off an installed vLLM (no tier needed)",
    ),
    "test": (
        "harness.verbs.test",
        "upstream tests pristine against patched, then the conformance suite",
    ),
    "check-stream": (
        "harness.verbs.check_stream",
        "check captured KV-event streams against the stream contract",
    ),
    "capture": ("harness.verbs.capture", "record a live KV-event stream to a file"),
    "export": (
        "harness.verbs.export",
        "the series as mails from the submitter (git format-patch, cover "
        "letter) and a pull-request description, with fail-before-fix evidence",
    ),
    "lint": (
        "harness.verbs.lint",
        "check the series files and patches that harness/targets.toml names",
    ),
    "port": (
        "harness.verbs.port",
        "carry a tier of a target's series onto another target's release "
        "(three-way merge)",
    ),
    "workloads": (
        "harness.verbs.workloads",
        "run seeded workloads inside a vLLM tree and record their events",
    ),
    "consumers": (
        "harness.verbs.consumers",
        "count what Dynamo's radix tree rejects, pristine against patched",
    ),
    "fidelity": (
        "harness.verbs.fidelity",
        "how well a router indexing the stream predicts the engine's hits",
    ),
    "e2e": (
        "harness.verbs.e2e",
        "a real vLLM engine's KV events, as released against patched",
    ),
    "score": (
        "harness.verbs.score",
        "score any router's predicted hits against a real engine's "
        "(the router protocol)",
    ),
    "shim": (
        "harness.verbs.shim",
        "a consumer the harness measures, as a router of the router protocol",
    ),
    "ci": (
        "harness.verbs.ci",
        "the hosted CI's matrix from harness/targets.toml, and its verdict table",
    ),
}

DESCRIPTION = """\
Fetch pinned vLLM sources, apply the KV-event patch series, and prove it:
upstream tests pristine against patched, plus the stream-contract
conformance suite.

What to run:
  python -m harness test --target main      the whole verdict for vLLM main
  python -m harness apply --target main --dest DIR
                                            a patched tree to look at
  python -m harness apply --target main --onto ~/src/vllm
                                            the series onto your own checkout
  python -m harness install --target 0.32 --tier strict
                                            the series on an installed vLLM
                                            (status, uninstall: README, Operators)
  python -m harness check-stream --zmq tcp://HOST:5557
                                            check a live engine's event stream
  python -m harness check-stream FILE       check a captured event stream
  python -m harness export --target main --out DIR --i-reviewed-every-line
                                            mails and a PR body for upstream
"""


def _epilog() -> str:
    lines = ["exit status:"]
    lines += [f"  {code:>3}  {meaning}" for code, meaning in exit_codes().items()]
    return "\n".join(lines)


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The parser, with the options of ``verb`` only (its module imported)."""
    parser = argparse.ArgumentParser(
        prog="python -m harness",
        description=DESCRIPTION,
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    subparsers = parser.add_subparsers(dest="verb", metavar="VERB")
    for name, (module, help_text) in VERBS.items():
        verb_parser = subparsers.add_parser(name, help=help_text, description=help_text)
        if name == verb:
            importlib.import_module(module).register(verb_parser)
    return parser


# The most of an error message the one line quotes (harness.errors.excerpt).
ERROR_LINES = 40
ERROR_CHARS = 4000


def main(argv: list[str] | None = None) -> int:
    """Run one verb; every way it can end is an exit status of its own."""
    stdout = _guard_standard_streams()
    previous_handlers = handle_stop_signals()
    try:
        status = _run_verb(sys.argv[1:] if argv is None else argv)
        sys.stdout.flush()  # a closed stdout shows here, not at exit
        return status
    except UserError as exc:
        error(excerpt(str(exc), ERROR_LINES, ERROR_CHARS))
        return exc.exit_code
    except (KeyboardInterrupt, Stopped) as exc:
        signum = getattr(exc, "signum", int(signal.SIGINT))
        error(STOP_SIGNALS[signum])
        return 128 + signum
    except BrokenPipeError:
        # Whoever read stdout stopped (`| head`): not a bug. Exit as a process
        # ended by SIGPIPE does, with nothing more written to the closed pipe.
        _silence_stdout()
        return 128 + signal.SIGPIPE
    except Exception:
        return _internal_error()
    finally:
        restore_handlers(previous_handlers)
        sys.stdout = stdout


def run_as_program() -> None:
    """`python -m harness` and the `vllm-kv-series` script: main's status,
    whenever a stop signal lands. One that lands as main returns, or while
    the interpreter exits after it, changes nothing: the verb has ended."""
    try:
        status = main()
    except KeyboardInterrupt:  # landed between main's handlers and here
        error(STOP_SIGNALS[signal.SIGINT])
        status = 128 + signal.SIGINT
    signal.pthread_sigmask(signal.SIG_BLOCK, set(STOP_SIGNALS))
    sys.exit(status)


def _internal_error() -> int:
    traceback.print_exc()
    error(
        "internal error: this is a bug in the harness; the traceback above says where"
    )
    return INTERNAL_ERROR


class _ClosedStdout(io.TextIOBase):
    """sys.stdout when the harness was started with it closed (``>&-``): the
    first write ends the verb as a closed pipe does (status 141)."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise BrokenPipeError("stdout is closed")

    def fileno(self) -> int:
        return 1


def _stdout_encoding_errors(exc: UnicodeError):
    """How stdout writes what its encoding cannot: a file name's bytes that
    are not UTF-8 (surrogate escapes, as os.fsdecode gives them) as those
    very bytes, anything else as a backslash escape."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    chunk = exc.object[exc.start : exc.end]
    if all("\udc80" <= char <= "\udcff" for char in chunk):
        return bytes(ord(char) - 0xDC00 for char in chunk), exc.end
    return codecs.backslashreplace_errors(exc)


codecs.register_error("harness.stdout", _stdout_encoding_errors)


class _GuardedStdout:
    """sys.stdout while a verb runs: a write that fails (a full disk,
    /dev/full) ends the verb with one line and OutputError's status."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._guarded(self._stream.write, text)

    def flush(self) -> None:
        self._guarded(self._stream.flush)

    def _guarded(self, action, *args):
        try:
            return action(*args)
        except BrokenPipeError:
            raise
        except OSError as exc:
            _silence_stdout()
            raise OutputError(
                f"cannot write the output to stdout: {exc.strerror or exc}"
            ) from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


class _ForgivingStderr:
    """sys.stderr once a verb has run: a write that fails (a full disk,
    /dev/full, a reader gone) is dropped, and so is everything after it,
    with stderr pointed at /dev/null so that nothing is left to fail at exit.
    What the harness says on the way (progress, warnings, the error line) is
    lost; the work goes on, and the verb's status is that of its outcome."""

    def __init__(self, stream):
        self._stream = stream
        self.failed = False

    def write(self, text: str) -> int:
        self._forgiving(self._stream.write, text)
        return len(text)

    def flush(self) -> None:
        self._forgiving(self._stream.flush)

    def _forgiving(self, action, *args) -> None:
        if self.failed:
            return
        try:
            action(*args)
        except (OSError, ValueError):  # ValueError: the stream was closed
            self.failed = True
            with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
                os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _guard_standard_streams():
    """A closed stdin, stdout or stderr is /dev/null underneath, so that no
    file the harness opens takes its number (and a child's output with it);
    a closed stdout fails the first write, a full one is an error line, and
    stdout writes any file name; a write to stderr that fails is dropped
    (`_ForgivingStderr`). Returns sys.stdout as it was."""
    for descriptor in (0, 1, 2):
        try:
            os.fstat(descriptor)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)
            if opened != descriptor:
                os.dup2(opened, descriptor)
                os.close(opened)
    if sys.stdout is None:
        sys.stdout = _ClosedStdout()
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (for the process's life)
    if not isinstance(sys.stderr, _ForgivingStderr):
        sys.stderr = _ForgivingStderr(sys.stderr)
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="harness.stdout")
    original = sys.stdout
    if not isinstance(original, _GuardedStdout):
        sys.stdout = _GuardedStdout(original)
    return original


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that what is still buffered for it is
    dropped at exit without another error."""
    with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _run_verb(argv: list[str]) -> int:
    verb = next((word for word in argv if not word.startswith("-")), None)
    parser = build_parser(verb)
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    return args.run(args)
