"""`lint`: the series files and patches that harness/targets.toml names."""

from pathlib import Path


def register(parser) -> None:
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        help="the repository to check (default: the checkout the harness runs in)",
    )
    parser.set_defaults(run=run)


def run(args) -> int:
    from harness import checkout
    from harness.series.lint import lint

    findings = lint((args.root or checkout.root()).resolve())
    for note in findings.notes:
        print(f"serieslint: {note}")
    for error in findings.errors:
        print(error)
    if findings.errors:
        print(f"serieslint: {len(findings.errors)} error(s)")
        return 1
    skipped = ""
    if findings.skipped:
        skipped = (
            f"; {len(findings.skipped)} series not applied for want of a "
            f"pristine tree ({', '.join(findings.skipped)})"
        )
    print(
        f"serieslint: OK, {findings.patches} patch file(s) checked, "
        f"{findings.applied} series applied without fuzz, "
        f"{findings.ruff_runs} run through ruff{skipped}"
    )
    return 0
