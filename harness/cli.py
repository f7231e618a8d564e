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
import importlib
import os
import signal
import sys
import traceback

from harness.errors import INTERNAL_ERROR, STOP_SIGNALS, Stopped, UserError, exit_codes
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


def main(argv: list[str] | None = None) -> int:
    """Run one verb; every way it can end is an exit status of its own."""
    previous_handlers = handle_stop_signals()
    try:
        status = _run_verb(sys.argv[1:] if argv is None else argv)
        sys.stdout.flush()  # a closed stdout shows here, not at exit
        return status
    except UserError as exc:
        error(str(exc))
        return exc.exit_code
    except (KeyboardInterrupt, Stopped) as exc:
        signum = getattr(exc, "signum", int(signal.SIGINT))
        error(STOP_SIGNALS[signum])
        return 128 + signum
    except BrokenPipeError:
        # Whoever read stdout stopped (`| head`): not a bug. Exit as a process
        # ended by SIGPIPE does, with nothing more written to the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except Exception:
        traceback.print_exc()
        error(
            "internal error: this is a bug in the harness; the traceback above "
            "says where"
        )
        return INTERNAL_ERROR
    finally:
        restore_handlers(previous_handlers)


def _run_verb(argv: list[str]) -> int:
    verb = next((word for word in argv if not word.startswith("-")), None)
    parser = build_parser(verb)
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    return args.run(args)
