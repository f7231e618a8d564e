"""`export`: the series as mails and a pull-request body for upstream submission."""

import shlex
from pathlib import Path

from harness.verbs import add_target_arguments

REVIEWED = "--i-reviewed-every-line"


def register(parser) -> None:
    add_target_arguments(parser)
    parser.add_argument(
        "--out", type=Path, required=True, help="new directory for the mails"
    )
    parser.add_argument(
        "--as",
        dest="submitter",
        metavar='"NAME <EMAIL>"',
        help="who submits the series: the author and signer of every mail "
        "(default: git's user.name and user.email)",
    )
    parser.add_argument(
        REVIEWED,
        dest="reviewed",
        action="store_true",
        help="required: you reviewed every changed line and can defend the "
        "change, as vLLM's AGENTS.md asks, and certify the DCO for the "
        "Signed-off-by: export adds in your name",
    )
    parser.add_argument(
        "--verdict",
        type=Path,
        help="the verdict JSON to quote (default: the newest one "
        "`python -m harness test` wrote for this target and tier)",
    )
    parser.add_argument(
        "--no-fail-before-fix",
        dest="fail_before_fix",
        action="store_false",
        help="skip running each patch's tests without and with its fix (pytest, "
        "in an environment with vLLM's requirements); the PR body then says "
        "they were not run",
    )
    parser.set_defaults(run=run)


def run(args) -> int:
    from harness.errors import SubmitterError
    from harness.log import progress, warning
    from harness.processes import require_program
    from harness.series.mail import export_series
    from harness.series.submitter import resolve_submitter
    from harness.targets import get_target

    if not args.reviewed:
        raise SubmitterError(
            "export signs every patch off in your name and says in the PR body "
            "that you reviewed every changed line; confirm it with " + REVIEWED
        )
    require_program("git", "export commits and formats the series with it")
    submitter = resolve_submitter(args.submitter)
    target = get_target(args.target)
    progress(f"submitting as {submitter}")
    export = export_series(
        target, args.tier, args.out, submitter, args.verdict, args.fail_before_fix
    )
    print(f"wrote {len(export.files)} files to {args.out}:")
    for path in export.files:
        print(f"  {path.name}")
    title, body = export.submission.title, args.out / "pr-body.md"
    print(
        f"pull request: gh pr create --repo vllm-project/vllm --title "
        f"{shlex.quote(title)} --body-file {shlex.quote(str(body))}"
    )
    print(
        "mails: git am --keep-non-patch (skip 0000-cover-letter.patch), or "
        "git send-email"
    )
    print(
        "before opening it: re-run the duplicate-work checks pr-body.md lists, and "
        "fill in what is left to you: " + "; ".join(export.left_to_submitter)
    )
    for message in export.warnings:
        warning(message)
    evidence = export.submission.evidence
    return 1 if evidence is not None and not export.submission.evidence_ok else 0
