"""`fetch`: a target's pristine tree in the cache; print its path. With
``--git DIR``, a new git checkout of the target's release at DIR (a fork
without GitHub, for `apply --onto`)."""

from pathlib import Path

from harness.verbs import add_target_arguments


def register(parser) -> None:
    parser.description = (
        "Unpack the target's pinned sdist (sha256 checked, nothing in it run) "
        "into the harness cache once and print the pristine tree's path. With "
        "--git DIR, also copy that tree to DIR, a new directory, as a git "
        "checkout of the release: one commit of every file with a fixed "
        "identity and date (the base commit of export's mails), tagged "
        "vX.Y.Z, on branch main; `apply --onto DIR` takes it."
    )
    add_target_arguments(parser, tier=False)
    parser.add_argument(
        "--git",
        type=Path,
        metavar="DIR",
        help="make DIR (new) a git checkout of the target's release, and print "
        "DIR instead of the cache's path",
    )
    parser.set_defaults(run=run)


def run(args) -> int:
    import os

    from harness.log import harness_command, progress
    from harness.targets import get_target
    from harness.trees.git_release import (
        check_destination,
        release_checkout,
        tag_of,
    )
    from harness.trees.sources import pristine_tree

    target = get_target(args.target)
    if args.git is None:
        print(pristine_tree(target))
        return 0
    dest = Path(os.path.abspath(args.git))
    check_destination(target, dest)
    commit = release_checkout(target, pristine_tree(target), dest)
    apply = harness_command("apply", "--target", target.name, "--onto", str(dest))
    progress(
        f"{dest}: {target.source.release_name()}, commit {commit[:12]}, tag "
        f"{tag_of(target.source)}; next: {apply} --commit"
    )
    print(dest)
    return 0
