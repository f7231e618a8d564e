"""`targets`: list the pinned vLLM targets, or one target's upstream tests."""

from harness.targets import SELECTIONS, load_targets


def register(parser) -> None:
    parser.add_argument(
        "--tests",
        metavar="TARGET",
        help="print TARGET's upstream test selection instead, one per line "
        "(for pytest in a fork: pytest $(python -m harness targets --tests T))",
    )
    parser.add_argument(
        "--selection",
        choices=SELECTIONS,
        default="ci",
        help="with --tests: ci (default, what `test` runs) or full",
    )
    parser.set_defaults(run=run)


def run(args) -> int:
    if args.tests:
        from harness.targets import get_target

        print("\n".join(get_target(args.tests).selection(args.selection)))
        return 0
    for target in load_targets().values():
        release = getattr(target.source, "version", "")
        print(
            f"{target.name:8} {target.source.kind:6} {release:8} {target.description}"
        )
    return 0
