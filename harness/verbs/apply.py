"""`apply`: a target's series applied to a fresh tree, or onto a checkout."""

from pathlib import Path

from harness.verbs import add_target_arguments


def register(parser) -> None:
    add_target_arguments(parser)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--dest", type=Path, help="new directory for the patched tree")
    where.add_argument("--onto", type=Path, help="a clean git checkout to patch")
    parser.set_defaults(run=run)


def run(args) -> int:
    from harness.series.apply import apply_onto, build_patched_tree
    from harness.targets import get_target

    target = get_target(args.target)
    if args.onto:
        apply_onto(target, args.tier, args.onto)
    else:
        build_patched_tree(target, args.tier, args.dest)
    return 0
