"""`targets`: list the pinned vLLM targets, one target's upstream tests, or the
vLLM releases newer than every target."""

from harness.targets import SELECTIONS, load_targets


def register(parser) -> None:
    parser.add_argument(
        "--tests",
        metavar="TARGET",
        help="print TARGET's upstream test selection instead, one per line "
        "(for pytest in a fork: pytest $(python -m harness targets --tests T "
        "--tier TIER --in .))",
    )
    parser.add_argument(
        "--selection",
        choices=SELECTIONS,
        default="ci",
        help="with --tests: ci (default, what `test` runs) or full",
    )
    parser.add_argument(
        "--tier",
        metavar="TIER",
        help="with --tests: the selection as TIER's patched tree holds it "
        "(default or strict): a single test (FILE::TEST) that only another "
        "tier's patches add is left out; without it, every tier's tests",
    )
    parser.add_argument(
        "--in",
        dest="tree",
        metavar="DIR",
        help="with --tests: leave out the single tests (FILE::TEST) that the "
        "vLLM tree DIR does not define, as `test` does for each tree: a test "
        "the strict tier adds, where the default tier is applied",
    )
    parser.add_argument(
        "--newer",
        action="store_true",
        help="ask the package index (through pip) which final vLLM releases are "
        "newer than every target, and print each with its sdist's sha256 to pin",
    )
    parser.set_defaults(run=run, usage_error=parser.error)


def run(args) -> int:
    extras = args.tree is not None or args.tier is not None or args.selection != "ci"
    if not args.tests and extras:
        args.usage_error("--in, --selection and --tier go with --tests TARGET")
    if args.newer:
        if args.tests:
            args.usage_error("--newer does not go with --tests")
        return _newer()
    if args.tests:
        from harness.targets import get_target

        target = get_target(args.tests)
        tests = target.selection(args.selection)
        if args.tier is not None:
            from harness.suites.upstream import for_tier

            tests = for_tier(target, args.tier, tests)
        if args.tree is not None:
            from pathlib import Path

            from harness.suites.upstream import runnable_in

            tree = Path(args.tree)
            if not tree.is_dir():
                args.usage_error(f"--in {args.tree}: not a directory")
            tests = runnable_in(tree, tests)
        print("\n".join(tests))
        return 0
    for target in load_targets().values():
        release = getattr(target.source, "version", "")
        print(
            f"{target.name:8} {target.source.kind:6} {release:8} {target.description}"
        )
    return 0


def _newer() -> int:
    from harness.targets import load_targets
    from harness.trees.releases import newer_releases, newest_pinned

    pinned = newest_pinned(list(load_targets().values()), "vllm")
    if pinned is None:
        print("no target pins a vLLM sdist release; nothing to compare with")
        return 0
    version, target = pinned
    newer = newer_releases("vllm", version)
    for release, sha256 in newer:
        print(
            f'vllm {release}: source = {{ sdist = "vllm=={release}", '
            f'sha256 = "{sha256}" }}'
        )
    if not newer:
        print(
            f"no vLLM release on the package index is newer than {version} "
            f"(target {target}'s)"
        )
    return 0
