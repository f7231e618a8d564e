"""`install`: a target's tier put on the vLLM installed in a Python environment."""

from harness.verbs import COST, add_python_argument, add_target_arguments


def register(parser) -> None:
    parser.description = (
        "Write the Python files a tier of the series changes over the vllm "
        "package installed for PYTHON (default: this one), after checking that "
        "it is the target's release and that every such file is still what the "
        "wheel's RECORD says it installed. The files are read from the target's "
        "pinned sdist (sha256 checked; nothing in it runs, no build tools) and "
        "patched here; a receipt beside the package lets `status` say what is "
        "installed and `uninstall` take it off without the tier. Interrupted, "
        f"it leaves the package as it was. Costs, {COST}: 9-19 s the first "
        "time (the target's 44-47 MB sdist through pip, kept in the harness "
        "cache), about 2 s after; restart the engine afterwards."
    )
    add_target_arguments(parser)
    add_python_argument(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from harness.installed.installation import installation_lock
    from harness.installed.installed import locate
    from harness.targets import get_target

    target = get_target(args.target)
    located = locate(args.python)
    with installation_lock(located):
        status = _install(args, target, located)
    warn_of_media(args.python)
    return status


def warn_of_media(python: str) -> None:
    """A warning when the engine's environment holds a media package that
    does not load against its torch: the engine would not start."""
    from harness.installed.media import check_media
    from harness.log import warning

    if (advice := check_media(python).advice()) is not None:
        warning(advice)


def _install(args, target, located) -> int:
    """The install, under the installation lock: a receipt read here is not
    changed by another run before the files are written."""
    from harness.installed.installation import RESTART, install
    from harness.installed.installed import check_recorded, check_release
    from harness.installed.overlay import (
        check_changes_only,
        prepare_overlay,
        touched_files,
    )
    from harness.installed.receipt import (
        RECEIPT,
        file_states,
        read_receipt,
        receipt_dir,
    )
    from harness.log import progress
    from harness.series.model import load_series

    check_release(target, located.dist)
    earlier = read_receipt(located)
    if (
        earlier is not None
        and (earlier.target, earlier.tier) == (target.name, args.tier)
        and set(file_states(located, earlier).values()) == {"patched"}
    ):
        print(
            f"target {target.name}'s {args.tier} tier is already on "
            f"{located.dist.describe()}; nothing to do"
        )
        return 0
    series = load_series(target, args.tier)
    check_changes_only(series, target, args.tier)
    if earlier is None:  # install refuses an earlier receipt, naming it
        check_recorded(located, touched_files(series))
    progress(f"{located.dist.describe()}: {args.tier} tier of target {target.name}")
    overlay = prepare_overlay(target, args.tier)
    install(located, target, overlay)
    print(
        f"installed target {target.name}'s {args.tier} tier on "
        f"{located.dist.describe()}: {len(overlay.files)} file(s) patched"
    )
    for path in overlay.files:
        print(f"  {path}")
    print(f"receipt: {receipt_dir(located) / RECEIPT}")
    print(RESTART)
    print(f"take it off: {located.harness_command('uninstall')}")
    return 0
