"""`apply`: a target's series applied to a fresh tree, or onto a checkout."""

from pathlib import Path

from harness.verbs import add_target_arguments


def register(parser) -> None:
    add_target_arguments(parser)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--dest", type=Path, help="new directory for the patched tree")
    where.add_argument("--onto", type=Path, help="a clean git checkout to patch")
    parser.add_argument(
        "--commit",
        action="store_true",
        help="with --onto: one commit per patch (git am), authored as the "
        "patch's headers say; without it (the default) the series is left as "
        "uncommitted changes to the working tree",
    )
    parser.set_defaults(run=run, usage_error=parser.error)


def run(args) -> int:
    from harness.series.apply import apply_onto, build_patched_tree
    from harness.series.commit_onto import commit_onto
    from harness.targets import get_target

    if args.commit and not args.onto:
        args.usage_error("--commit goes with --onto")
    target = get_target(args.target)
    if args.onto and args.commit:
        for line in commit_onto(target, args.tier, args.onto):
            print(line)
    elif args.onto:
        apply_onto(target, args.tier, args.onto)
    else:
        build_patched_tree(target, args.tier, args.dest)
    return 0
