"""`lint`: the series files and patches that harness/targets.toml names."""

from pathlib import Path


def register(parser) -> None:
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        help="the repository to check (default: the checkout the harness runs in)",
    )
    parser.set_defaults(run=run, usage_error=parser.error)


def run(args) -> int:
    from harness import checkout
    from harness.series.lint import lint

    try:
        root = (args.root or checkout.root()).resolve()
    except (RuntimeError, OSError) as exc:  # a symlink loop (3.11: RuntimeError)
        args.usage_error(f"--root {args.root}: {exc}")
    findings = lint(root)
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
