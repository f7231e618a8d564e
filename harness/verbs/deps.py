"""`deps`: pip install what a target's upstream tests import."""

from harness.verbs import add_target_arguments


def register(parser) -> None:
    add_target_arguments(parser, tier=False)
    parser.set_defaults(run=run)


def run(args) -> int:
    from harness.targets import get_target
    from harness.trees.deps import install_test_requirements

    return install_test_requirements(get_target(args.target))
