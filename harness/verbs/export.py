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
        "--patches",
        type=patch_range,
        metavar="FIRST[-LAST]",
        help="export only these patches of the tier's series (numbered from 1 "
        "as its series file lists them; LAST defaults to the end): a single "
        "patch is committed straight onto the pristine tree, its own pull "
        "request; a range on top of the patches before it",
    )
    placing = parser.add_mutually_exclusive_group()
    placing.add_argument(
        "--alone",
        dest="alone",
        action="store_true",
        default=None,
        help="commit the --patches range straight onto the pristine tree, "
        "without the patches before it (the default for a single patch)",
    )
    placing.add_argument(
        "--stacked",
        dest="alone",
        action="store_false",
        help="commit the --patches range on top of the patches before it, as "
        "the follow-up of the pull request that holds them (the default for "
        "a range)",
    )
    parser.add_argument(
        "--no-fail-before-fix",
        dest="fail_before_fix",
        action="store_false",
        help="skip running each patch's tests without and with its fix, the "
        "Validation command and the measurements (pytest and the trees' "
        "workloads, in an environment with vLLM's requirements); the texts "
        "then say they were not run",
    )
    parser.set_defaults(run=run)


def patch_range(text: str) -> tuple[int, int | None]:
    """``3`` or ``1-3`` or ``2-``: (first, last), last None for the end."""
    import argparse

    first, dash, last = text.partition("-")
    try:
        found = (int(first), int(last) if last else None)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not FIRST or FIRST-LAST (patch numbers from 1)"
        ) from None
    if not dash:
        found = (found[0], found[0])
    if found[0] < 1 or (found[1] is not None and found[1] < found[0]):
        raise argparse.ArgumentTypeError(f"{text!r} is not a range of patches")
    return found


def run(args) -> int:
    from harness import scratch
    from harness.errors import SubmitterError
    from harness.log import progress, warning
    from harness.processes import require_program
    from harness.routers import designs
    from harness.submission.call_cost import Measurer
    from harness.submission.mail import export_series
    from harness.submission.submitter import resolve_submitter
    from harness.targets import get_target
    from harness.workloads import call_cases, call_count

    if not args.reviewed:
        raise SubmitterError(
            "export signs every patch off in your name and says in the PR body "
            "that you reviewed every changed line; confirm it with " + REVIEWED
        )
    require_program("git", "export commits and formats the series with it")
    submitter = resolve_submitter(args.submitter)
    target = get_target(args.target)
    # Absolute before any work: git runs in a scratch repository elsewhere.
    out = scratch.absolute(args.out, "--out")
    progress(f"submitting as {submitter}")
    export = export_series(
        target,
        args.tier,
        out,
        submitter,
        args.verdict,
        args.fail_before_fix,
        args.patches,
        args.alone,
        measure_calls=Measurer(call_cases.cases_for, call_count.measure),
        measure_designs=designs.at_export,
    )
    print(f"wrote {len(export.files)} files to {out}:")
    for path in export.files:
        print(f"  {path.name}")
    if export.submission is None:
        said_comment(export, out)
    else:
        said_pull_request(export, out)
    for message in export.warnings:
        warning(message)
    sub = export.submission
    if sub is None:
        return 0
    validation = sub.validation
    failed = sub.evidence is not None and not sub.evidence_ok
    return 1 if failed or (validation is not None and not validation.passed) else 0


def said_comment(export, out: Path) -> None:
    """How to post a comment export: on the open pull request, no other."""
    from harness.submission.comment import filename
    from harness.submission.related_work import REPOSITORY

    pull = export.standing.pull
    print(
        f"comment: post {filename(pull)} on {REPOSITORY}#{pull}; this change "
        f"{export.standing.said()} upstream, so no pull request of it is made"
    )
    print(f"before posting it: {'; '.join(export.left_to_submitter)}")


def said_pull_request(export, out: Path) -> None:
    """How to open a pull-request export, and what comes first."""
    from harness.submission.discussion import RFC_ISSUE
    from harness.submission.pull_request import ISSUE_DRAFT

    title, body = export.submission.title, out / "pr-body.md"
    print(
        f"pull request: gh pr create --repo vllm-project/vllm --title "
        f"{shlex.quote(title)} --body-file {shlex.quote(str(body))}"
    )
    print(
        "mails: git am --keep-non-patch (skip 0000-cover-letter.patch), or "
        "git send-email"
    )
    if export.issue_draft:
        print(
            f"first: open the issue from {ISSUE_DRAFT} and put its number in "
            "pr-body.md's `Fixes #____`"
        )
    if export.rfc:
        print(f"first: open the RFC issue from {RFC_ISSUE} and wait for its feedback")
    checks = (
        "re-run the duplicate-work checks pr-body.md lists, and "
        if export.submission.about_issue
        else ""
    )
    print(
        f"before opening it: {checks}fill in what is left to you: "
        + "; ".join(export.left_to_submitter)
    )
