"""The harness's errors: each class says what went wrong and carries its exit code.

`harness.cli.main` is the only place that catches them: it prints the message
as one line, ``error: ...``, and exits with the class's code. Codes 0, 1 and 2
keep their usual meanings (`EXIT_CODES`); every error class has a code of its
own, so a script can tell them apart. docs/exit-status.md is this table.
"""

import signal

# A bug in the harness: an exception no error class describes. cli.main prints
# its traceback and exits with this code (EX_SOFTWARE of sysexits.h), never 1,
# which says a check found a problem.
INTERNAL_ERROR = 70
# The signals that end a verb early, each with the status it exits with
# (128 + the signal's number, as a shell reports a process a signal ended).
STOP_SIGNALS = {
    signal.SIGHUP: "hung up (the terminal closed)",
    signal.SIGINT: "interrupted (Ctrl-C)",
    signal.SIGTERM: "terminated (SIGTERM)",
}

# What a verb's exit status means. A check that ran and found a problem (a
# verdict FAIL, a stream violation, a lint finding) exits 1, not with an
# error's code.
EXIT_CODES = {
    0: "success: the check ran and found nothing wrong",
    1: "the check ran and found a problem (verdict FAIL, violations, findings)",
    2: "usage: the command line is wrong (argparse)",
    INTERNAL_ERROR: "internal error: a bug in the harness (a traceback is printed)",
    **{128 + number: meaning for number, meaning in STOP_SIGNALS.items()},
    128 + signal.SIGPIPE: "stdout closed before the output was written (a pipe "
    "to head)",
}


class Stopped(BaseException):
    """A stop signal (SIGTERM, SIGHUP) arrived; raised in the main thread like
    KeyboardInterrupt for Ctrl-C, so that every ``finally`` and context manager
    on the way out cleans up (harness.processes installs the handlers)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class UserError(Exception):
    """An error the user can act on, of no more specific kind.

    Printed as one line, no traceback. Not raised itself: raise the subclass
    that names the failure.
    """

    exit_code = 3


class CheckoutError(UserError):
    """The verb needs a checkout of this project and none was found."""

    exit_code = 4


class TargetError(UserError):
    """A pin in harness/targets.toml, or a target name, that cannot be used."""

    exit_code = 5


class SourceError(UserError):
    """A pristine vLLM tree, or a released wheel, that cannot be had."""

    exit_code = 6


class SeriesError(UserError):
    """A series that cannot be read or applied."""

    exit_code = 7


class TestRunError(UserError):
    """A pytest run that produced no usable outcomes."""

    __test__ = False  # not a test class, despite its name
    exit_code = 8


class UnreadableInput(UserError):
    """Input that cannot be read: not a KV-event stream, not a verdict."""

    exit_code = 9


class UnreadableStream(UnreadableInput):
    """Input that is not a sequence of KVEventBatch payloads.

    ``position`` says where, e.g. "byte 1234" or "message 7".
    """

    def __init__(self, position: str, reason: str, source: str | None = None):
        where = f"unreadable at {position}" if position else "unreadable"
        if source:
            where = f"{source}: {where}"
        super().__init__(f"{where}: {reason}")
        self.position = position
        self.reason = reason
        self.source = source

    def located(self, source: str) -> "UnreadableStream":
        """The same error, naming the file or endpoint it was read from."""
        return UnreadableStream(self.position, self.reason, source)


class SubscriptionError(UserError):
    """A ZMQ subscription that could not be made or kept."""

    exit_code = 10


class OutputError(UserError):
    """A file or directory the verb was asked to write cannot be written."""

    exit_code = 11


class ExportError(UserError):
    """An export that cannot be made."""

    exit_code = 12


class WorkloadError(UserError):
    """A workload that did not run inside a vLLM tree."""

    exit_code = 13


class E2EError(UserError):
    """An end-to-end run that could not be carried out."""

    exit_code = 14


class MissingDependency(UserError):
    """An optional dependency, or a program the verb runs, is not installed."""

    exit_code = 15


class IncompleteStream(UserError):
    """A stream that is not whole: empty, nothing received, messages missing.

    The checker cannot call such a stream clean, whatever it found in it.
    """

    exit_code = 16

    def __init__(self, source: str, reason: str):
        super().__init__(f"{source}: incomplete: {reason}")
        self.source = source
        self.reason = reason


class CacheError(UserError):
    """The harness cache cannot be used (not a directory, not writable)."""

    exit_code = 17


class SubmitterError(UserError):
    """No person to sign the exported patches off, or no word they reviewed them."""

    exit_code = 18


class PackageError(UserError):
    """An installed vLLM the series cannot be put on or taken off."""

    exit_code = 19


class PortConflict(UserError):
    """A port whose merge needs hands: a patch conflicts with the new release."""

    exit_code = 20


class IndexUnreachable(UserError):
    """The package index cannot be asked (pip fails, or does not answer in time)."""

    exit_code = 21


class BrokenDependency(UserError):
    """A package the verb needs is installed but does not load."""

    exit_code = 22


class RouterProtocolError(UserError):
    """A router that broke the router protocol (docs/router-protocol.md).

    ``problem`` says how: "malformed", "oversized", "late", "behind" or
    "exited"; the router was ended.
    """

    exit_code = 23

    def __init__(self, router: str, problem: str, detail: str):
        super().__init__(f"router {router}: {problem}: {detail}")
        self.router = router
        self.problem = problem
        self.detail = detail


# The most an error line quotes of what a tool said (git's or quilt's output,
# a list of files that could not be copied): enough to act on, never a flood.
QUOTE_LINES = 20
QUOTE_CHARS = 2000


def excerpt(text: str, lines: int = QUOTE_LINES, chars: int = QUOTE_CHARS) -> str:
    """``text`` cut to its first ``lines`` lines and ``chars`` characters,
    saying how much was left out."""
    whole = "\n".join(text.splitlines())
    shown = "\n".join(whole.split("\n")[:lines])[:chars]
    if len(shown) < len(whole):
        shown += f"\n... ({len(whole) - len(shown)} more characters not shown)"
    return shown


def require(module: str, extra: str):
    """Import ``module`` of the optional dependencies ``extra`` of
    pyproject.toml, or say how to install them."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependency(
            f"{module.split('.')[0]} is not installed; install the harness's "
            f"{extra!r} extra: pip install -e '.[{extra}]' in the checkout"
        ) from None


def exit_codes() -> dict[int, str]:
    """Every exit status a verb can end with, and what it means."""
    codes = dict(EXIT_CODES)
    for error in (UserError, *UserError.__subclasses__()):
        codes[error.exit_code] = error.__doc__.splitlines()[0].rstrip(".")
    return dict(sorted(codes.items()))
