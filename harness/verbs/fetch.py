"""`fetch`: a target's pristine tree in the cache; print its path."""

from harness.verbs import add_target_arguments


def register(parser) -> None:
    add_target_arguments(parser, tier=False)
    parser.set_defaults(run=run)


def run(args) -> int:
    from harness.targets import get_target
    from harness.trees.sources import pristine_tree

    print(pristine_tree(get_target(args.target)))
    return 0
