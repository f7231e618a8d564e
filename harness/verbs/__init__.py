"""One module per verb of ``python -m harness``.

Each holds ``register(parser)``, which adds the verb's options and sets
``run``, and ``run(args) -> int``, which asks the core modules for the work,
prints the result and returns the exit status. Heavy or optional imports
happen inside ``run``, so that ``VERB --help`` needs only the standard
library.
"""

import argparse
import math

from harness.targets import TIERS

# Where the costs each long verb's --help gives were measured.
COST = "measured on a shared 2-core x86_64 machine, the kind CI runs on"


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


def add_python_argument(parser) -> None:
    """``--python``: the interpreter whose installed vllm a verb works on."""
    import sys

    parser.add_argument(
        "--python",
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
        metavar="ENDPOINT",
        help="connect to the engine's publisher: tcp://HOST:PORT for an engine "
        "whose kv_events_config endpoint binds (vLLM's default, tcp://*:5557: "
        "--zmq tcp://ENGINE-HOST:5557; tcp://*:PORT means this host), or its "
        "ipc:// endpoint",
    )
    where.add_argument(
        "--listen",
        metavar="ENDPOINT",
        help="bind ENDPOINT and wait for the engine to connect, for one whose "
        "kv_events_config endpoint is tcp://THIS-HOST:PORT (vLLM connects to "
        "an endpoint without a wildcard)",
    )
    parser.add_argument(
        "--topic", default="", metavar="T", help="ZMQ topic prefix (default: all)"
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
    return value
