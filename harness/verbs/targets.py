"""`targets`: list the pinned vLLM targets."""

from harness.targets import load_targets


def register(parser) -> None:
    parser.set_defaults(run=run)


def run(args) -> int:
    for target in load_targets().values():
        print(f"{target.name:8} {target.source.kind:6} {target.description}")
    return 0
