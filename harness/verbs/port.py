"""`port`: one tier of a target's series carried onto another target's release.

The lines on stdout say how each patch came across; on a conflict, each
conflicting place, then the error line names the merge kept for the user.
"""

from pathlib import Path

from harness.targets import TIERS


def register(parser) -> None:
    parser.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="TARGET",
        help="the target whose series to carry (its pristine tree is the merge's base)",
    )
    parser.add_argument(
        "--to",
        dest="dest",
        required=True,
        metavar="TARGET",
        help="the target to carry it to (its patches directory need not exist)",
    )
    parser.add_argument(
        "--tier",
        choices=TIERS,
        default="default",
        help="the tier whose series file to port (default: default); one per run",
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="a new or empty directory for the ported patches and series file "
        "(default: a new folder in the temporary directory, printed); never a "
        "patches directory of targets.toml",
    )
    parser.set_defaults(run=run)


def run(args) -> int:
    from harness.errors import PortConflict
    from harness.series.port import FAILED, port
    from harness.targets import get_target

    source, dest = get_target(args.source), get_target(args.dest)
    result = port(source, dest, args.tier, args.out)
    count = len(result.outcomes)
    for number, outcome in enumerate(result.outcomes, 1):
        print(f"[{number}/{count}] {outcome.patch}: {outcome.describe(result.release)}")
        for conflict in outcome.conflicts:
            print(f"    {conflict}")
        for path in outcome.left_out:
            print(f"    {path}: left out, {result.release} has its change already")
    if result.kept is not None:
        failed = next(o for o in result.outcomes if o.kind in FAILED)
        what = "conflicts with" if failed.kind == "conflict" else "changes nothing on"
        rest = (
            f", then `git cherry-pick {result.rest}..from` for the patches after it"
            if result.rest
            else ""
        )
        raise PortConflict(
            f"{failed.patch} {what} {result.release}; nothing was written (no "
            f"--out, nothing in patches/). The merge is kept in {result.kept}: "
            f"resolve it there (git status; git add the files; git cherry-pick "
            f"--continue{rest}), or port the patch by hand (CONTRIBUTING.md); "
            f"rm -rf {result.kept} when done"
        )
    print(
        f"wrote the {args.tier} tier's ported series ({result.series_name} and "
        f"{count} patch(es)) to {result.out}"
    )
    print(
        f"it applies to target {dest.name}'s pristine tree in order, without fuzz; "
        f"run-time correctness is NOT verified yet (a clean merge can still call "
        f"a helper {result.release} renamed): put it in the target's patches "
        f"directory, then run `python -m harness lint` and `python -m harness "
        f"test --target {dest.name} --tier {args.tier}`"
    )
    return 0
