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
    print(
        f"serieslint: OK, {findings.patches} patch file(s) checked, "
        f"{findings.ruff_runs} series run through ruff"
    )
    return 0
