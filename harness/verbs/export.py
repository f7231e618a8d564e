"""`export`: the series as mails for upstream submission."""

from pathlib import Path

from harness.verbs import add_target_arguments


def register(parser) -> None:
    add_target_arguments(parser)
    parser.add_argument(
        "--out", type=Path, required=True, help="new directory for the mails"
    )
    parser.add_argument(
        "--verdict",
        type=Path,
        help="the verdict JSON to quote (default: the newest one "
        "`python -m harness test` wrote for this target and tier)",
    )
    parser.set_defaults(run=run)


def run(args) -> int:
    from harness.log import warning
    from harness.series.mail import export_series
    from harness.targets import get_target

    target = get_target(args.target)
    mails, warnings = export_series(target, args.tier, args.out, args.verdict)
    print(f"wrote {len(mails)} mails to {args.out}:")
    for mail in mails:
        print(f"  {mail.name}")
    print(
        "apply them with `git am --keep-non-patch` (skip 0000-cover-letter.patch); "
        "before sending, fill in the DUPLICATE CHECK line of the cover letter"
    )
    for message in warnings:
        warning(message)
    return 0
