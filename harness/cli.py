"""Command line entry point: ``python -m harness VERB ...``.

Each verb lives in the module that owns its concern; that module exposes
``register(subparsers)`` which adds the verb's parser and sets ``func`` to a
callable taking the parsed arguments and returning an exit code.
"""

import argparse
import importlib
import sys

# Modules that contribute verbs, in the order `--help` lists them.
VERB_MODULES = (
    "harness.targets",  # targets
    "harness.sources",  # fetch, deps
    "harness.series",  # apply
    "harness.testrun",  # test
    "harness.stream",  # check-stream
    "harness.capture",  # capture
    "harness.export",  # export
    "harness.consumers",  # consumers
    "harness.e2e",  # e2e
)

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
  python -m harness check-stream FILE       check a captured event stream
  python -m harness export --target main --out DIR
                                            mails for upstream submission
"""


class UserError(Exception):
    """A failure the user can act on: printed as one line, no traceback."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    subparsers = parser.add_subparsers(dest="verb", metavar="VERB")
    for module_name in VERB_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # verb not built yet
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
