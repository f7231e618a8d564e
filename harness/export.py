"""The `export` verb: the series as mails for upstream submission.

The pristine tree is committed into a scratch git repository ("vLLM X
pristine", with a fixed identity and date so that its id is the same on every
machine), each patch of the tier is applied as a commit with
`git am --keep-non-patch` (plain `git am` would strip the upstream tags such as
[Bugfix][KV Events] from the subjects), and `git format-patch --cover-letter
--base=<that commit>` writes the mails. The cover letter is filled in: the
series title, the problem, one line per patch, the evidence from the latest
`python -m harness test` verdict for the same target and tier (or a plain
statement that there is none), the AI-assistance disclosure and a DCO note.

The output directory appears complete or not at all: the mails are written
next to it and renamed into place.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from harness.cli import UserError
from harness.series import TIERS, Series, load_series
from harness.sources import cache_dir, pristine_tree, progress
from harness.targets import SELECTIONS, GitSource, SdistSource, Target, get_target
from harness.verdict import FAILING

SERIES_TITLE = (
    "[Bugfix][KV Events] Make the KV-cache event stream reconstructable "
    "for partial prefix-cache entries"
)
PROBLEM = """\
With a hash block size smaller than a group's block size (hybrid KV caches),
BlockPool.cache_partial_block() reports a partial prefix-cache entry whose
parent is a hash boundary that no KV event ever reported. A consumer that
rebuilds the prefix tree from the event stream cannot attach such an entry:
NVIDIA Dynamo's radix-tree indexer rejects the store ("Failed to find parent
block") and llm-d indexes it as an orphan. The series reports the missing
boundaries as BlockStored events of one hash block each, retires them with
the entry, and leaves every event emitted before byte for byte as it was.
"""
# A fixed identity and date for the scratch commits, so that the pristine
# base commit (and with it `base-commit:`) is the same wherever it is made.
EXPORT_IDENTITY = ("vllm-kv-series export", "export@localhost")
BASE_COMMIT_DATE = "2000-01-01T00:00:00+0000"
SIGNED_OFF = re.compile(r"^Signed-off-by: .+ <[^>]+@[^>]+>\s*$", re.MULTILINE)
AI_TRAILER = re.compile(
    r"^(Co-authored-by|Assisted-by|Generated-by): .+$", re.MULTILINE | re.IGNORECASE
)
# vLLM asks for an RFC issue before changes over this many lines (tests,
# kernels, data and config excluded).
RFC_LINE_LIMIT = 500
# How the conformance report's keys read in the letter; other keys are shown
# under their own names, and these are left out as the letter already says them.
REPORT_LABELS = {
    "classes": "stream class",
    "rules": "checker rule",
    "workloads": "seeded workloads replayed",
    "wire": "wire byte-identity",
    "consumers": "consumer rejections",
    "rejections": "consumer rejections",
}
REPORT_KEYS_SKIPPED = ("target", "tier")


class ExportError(UserError):
    """An export that cannot be made."""


def git(repo: Path, *args: str, env: dict | None = None) -> str:
    """Run git in repo with the user's configuration left out; return stdout."""
    name, email = EXPORT_IDENTITY
    isolated = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CEILING_DIRECTORIES": str(repo.resolve().parent),
        **(env or {}),
    }
    command = ["git", "-c", f"user.name={name}", "-c", f"user.email={email}"]
    result = subprocess.run(
        [*command, *args], cwd=repo, env=isolated, capture_output=True, text=True
    )
    if result.returncode != 0:
        said = [
            line
            for line in (result.stderr or result.stdout).splitlines()
            if line.strip() and not line.startswith("hint:")
        ]
        detail = "\n".join(said) or "no output"
        raise ExportError(
            f"git {args[0]} failed in {repo}:\n{textwrap.indent(detail, '    ')}"
        )
    return result.stdout


def release_name(target: Target) -> str:
    source = target.source
    if isinstance(source, SdistSource):
        return f"vLLM {source.version}"
    if isinstance(source, GitSource):
        return f"vLLM {source.commit[:12]}"
    return f"vLLM {source.path.name}"


def source_description(target: Target) -> str:
    source = target.source
    if isinstance(source, SdistSource):
        return f"the sdist {source.name}=={source.version} (sha256 {source.sha256})"
    if isinstance(source, GitSource):
        return f"commit {source.commit} of {source.url}"
    return f"the local tree {source.path}"


def commit_pristine(target: Target, repo: Path) -> str:
    """Copy the pristine tree into repo and commit it; return the commit id."""
    pristine = pristine_tree(target)
    progress(f"copying the pristine tree of {target.name} ({pristine})")
    shutil.copytree(
        pristine, repo, symlinks=True, ignore=shutil.ignore_patterns(".git")
    )
    git(repo, "init", "--quiet", "--initial-branch=series")
    # --force: the tree's own .gitignore must not keep files out of the base.
    git(repo, "add", "--all", "--force", ".")
    fixed_date = {
        "GIT_AUTHOR_DATE": BASE_COMMIT_DATE,
        "GIT_COMMITTER_DATE": BASE_COMMIT_DATE,
    }
    message = (
        f"{release_name(target)} pristine\n\n"
        f"Unpacked from {source_description(target)}.\n"
    )
    git(repo, "commit", "--quiet", "--no-verify", "-m", message, env=fixed_date)
    return git(repo, "rev-parse", "HEAD").strip()


def apply_as_commits(repo: Path, series: Series) -> list[str]:
    """`git am --keep-non-patch` every patch of the series; return the commits."""
    commits = []
    for number, entry in enumerate(series.entries, 1):
        progress(f"git am [{number}/{len(series.entries)}] {entry.patch}")
        try:
            git(
                repo,
                "am",
                "--quiet",
                "--keep-non-patch",
                "--committer-date-is-author-date",
                f"-p{entry.strip}",
                str(series.patch_path(entry).resolve()),
            )
        except ExportError as exc:
            raise ExportError(
                f"patch {entry.patch} from {series.series_file} does not go in "
                f"with git am --keep-non-patch: {exc}"
            ) from None
        commit = git(repo, "rev-parse", "HEAD").strip()
        message = git(repo, "log", "-1", "--format=%B", commit)
        if not SIGNED_OFF.search(message):
            raise ExportError(
                f"patch {entry.patch} has no 'Signed-off-by: Name <email>' line; "
                f"upstream requires a DCO sign-off on every commit"
            )
        commits.append(commit)
    return commits


# --------------------------------------------------------------------------
# The verdict of `python -m harness test`
# --------------------------------------------------------------------------


def default_verdict(target: Target, tier: str) -> Path | None:
    """The newest report `python -m harness test` wrote for target and tier."""
    reports = cache_dir() / "reports"
    found = [
        path
        for selection in SELECTIONS
        if (path := reports / f"{target.name}-{tier}-{selection}.json").is_file()
    ]
    return max(found, key=lambda path: path.stat().st_mtime) if found else None


def read_verdict(path: Path, target: Target, tier: str) -> dict:
    try:
        verdict = json.loads(path.read_text())
    except OSError as exc:
        raise ExportError(f"cannot read the verdict {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ExportError(f"the verdict {path} is not JSON: {exc}") from None
    if not isinstance(verdict, dict) or "patched" not in verdict:
        raise ExportError(
            f"{path} is not a verdict written by `python -m harness test`"
        )
    found = (verdict.get("target"), verdict.get("tier"))
    if found != (target.name, tier):
        raise ExportError(
            f"the verdict {path} is for target {found[0]} tier {found[1]}, "
            f"not target {target.name} tier {tier}"
        )
    return verdict


def render_evidence(verdict: dict, path: Path) -> list[str]:
    """The verdict as plain text lines for the cover letter."""
    written = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(path.stat().st_mtime))
    command = (
        f"python -m harness test --target {verdict['target']} "
        f"--tier {verdict['tier']} --selection {verdict.get('selection', 'ci')}"
    )
    pristine = verdict.get("pristine", {}).get("tally", {})
    patched = verdict.get("patched", {}).get("tally", {})
    minutes, seconds = divmod(round(verdict.get("wall_seconds", 0)), 60)
    lines = [
        wrap(
            f"Evidence: `{command}`, verdict written {written} "
            f"({minutes}m{seconds:02d}s). vLLM's own tests, run on the pristine "
            "and on the patched tree:"
        ),
        "",
        f"  {'outcome':10} {'pristine':>9} {'patched':>9}",
    ]
    for outcome in ("passed", "failed", "skipped"):
        lines.append(
            f"  {outcome:10} {pristine.get(outcome, 0):>9} {patched.get(outcome, 0):>9}"
        )
    regressions = verdict.get("regressions", {})
    added = verdict.get("added", {})
    failing_added = [test for test, outcome in added.items() if outcome in FAILING]
    environmental = verdict.get("environmental", {})
    lines += [
        "",
        f"  regressions (passed on pristine, not on patched): {len(regressions)}",
    ]
    lines += [f"    {test}: {' -> '.join(pair)}" for test, pair in regressions.items()]
    lines.append(
        f"  tests added by the series: {len(added)}, "
        f"{len(failing_added)} of them failing"
    )
    lines += [f"    {test}: {added[test]}" for test in failing_added]
    lines.append(f"  failing on both trees (environment): {len(environmental)}")
    lines += ["", *render_conformance(verdict.get("conformance", {}))]
    lines += ["", f"Verdict: {verdict_result(verdict)}"]
    return lines


def verdict_result(verdict: dict) -> str:
    if verdict.get("passed"):
        return "PASS"
    reasons = []
    if verdict.get("regressions"):
        reasons.append(f"{len(verdict['regressions'])} regression(s)")
    failing = [o for o in verdict.get("added", {}).values() if o in FAILING]
    if failing:
        reasons.append(f"{len(failing)} added test(s) failing")
    conformance = verdict.get("conformance", {}).get("status", "not recorded")
    if conformance != "passed":
        reasons.append(f"conformance suite: {conformance}")
    return f"FAIL ({'; '.join(reasons)})" if reasons else "FAIL"


def render_conformance(conformance: dict) -> list[str]:
    status = conformance.get("status", "not recorded")
    lines = [
        f"The project's stream-contract conformance suite: {status}, "
        f"{conformance.get('passed', 0)} passed, {conformance.get('failed', 0)} failed."
    ]
    report = conformance.get("report")
    if not isinstance(report, dict):
        return lines
    for key, value in report.items():
        if key in REPORT_KEYS_SKIPPED:
            continue
        label = REPORT_LABELS.get(key, key.replace("_", " "))
        if (
            isinstance(value, dict)
            and value
            and all(
                isinstance(counts, dict) and {"pristine", "patched"} <= set(counts)
                for counts in value.values()
            )
        ):
            lines += ["", f"  {label:24} {'pristine':>9} {'patched':>9}"]
            lines += [
                f"  {name:24} {counts['pristine']!s:>9} {counts['patched']!s:>9}"
                for name, counts in value.items()
            ]
        elif isinstance(value, dict):
            lines += ["", f"  {label}:"]
            lines += [f"    {name}: {item}" for name, item in value.items()]
        else:
            lines += ["", f"  {label}: {value}"]
    return lines


# --------------------------------------------------------------------------
# The cover letter
# --------------------------------------------------------------------------


def patch_subjects(repo: Path, commits: list[str]) -> list[str]:
    return [git(repo, "log", "-1", "--format=%s", commit).strip() for commit in commits]


def changed_lines_outside_tests(repo: Path, base: str) -> int:
    total = 0
    for line in git(repo, "diff", "--numstat", base, "HEAD").splitlines():
        added, removed, path = line.split("\t", 2)
        if not path.startswith("tests/") and added != "-":
            total += int(added) + int(removed)
    return total


def wrap(paragraph: str) -> str:
    return textwrap.fill(paragraph, width=72, break_on_hyphens=False)


def cover_blurb(
    target: Target,
    tier: str,
    subjects: list[str],
    optional: set[int],
    evidence: list[str] | None,
) -> str:
    count = len(subjects)
    lines = [PROBLEM.rstrip(), "", f"The series, against {release_name(target)}:", ""]
    for number, subject in enumerate(subjects, 1):
        mark = "  (optional)" if number in optional else ""
        lines.append(f"  {number}/{count} {subject}{mark}")
    if optional:
        lines += [
            "",
            "Patches marked (optional) are outside the project's default tier;",
            "each can be taken or left on its own, and its message says why.",
        ]
    lines.append("")
    if evidence is None:
        lines.append(
            wrap(
                f"No test verdict was found for target {target.name}, tier "
                f"{tier} (`python -m harness test --target {target.name} --tier "
                f"{tier}` writes one), so this letter reports no test results."
            )
        )
    else:
        lines += evidence
    lines += [
        "",
        wrap(
            "The patches apply with `git am --keep-non-patch` (plain `git am` "
            "drops the bracketed tags from the subjects). The base-commit below "
            f"is {release_name(target)} as unpacked from "
            f"{source_description(target)}, committed with a fixed identity and "
            "date."
        ),
        "",
        "AI assistance: this series was prepared with AI assistance (Claude).",
        "Related work, as last known to this project (re-check open PRs before",
        "sending): #58121 addresses the same defect by filling the skipped_*",
        "fields that in-flight #44488 adds to BlockStored, a schema change;",
        "this series changes no schema, so every existing event stays byte for",
        "byte, and it also retires what it reports. #58394 tracks promotion,",
        "which the optional patches cover.",
        "*** DUPLICATE CHECK HERE: the open issues and PRs checked today ***",
        "",
        "Every patch carries a Signed-off-by: line under the Developer",
        "Certificate of Origin 1.1 (the DCO file at the top of the vLLM tree).",
    ]
    return "\n".join(lines)


def fill_cover_letter(letter: Path, subject: str, blurb: str) -> None:
    text = letter.read_text()
    for placeholder in ("*** SUBJECT HERE ***", "*** BLURB HERE ***"):
        if text.count(placeholder) != 1:
            raise ExportError(
                f"{letter.name} from git format-patch does not hold {placeholder} "
                f"exactly once; cannot fill it"
            )
    text = text.replace("*** SUBJECT HERE ***", subject)
    letter.write_text(text.replace("*** BLURB HERE ***", blurb))


# --------------------------------------------------------------------------
# The verb
# --------------------------------------------------------------------------


def export_series(
    target: Target, tier: str, out: Path, verdict_path: Path | None = None
) -> tuple[list[Path], list[str]]:
    """Write the mails to out (which must not exist); return them and warnings."""
    if out.exists():
        raise ExportError(f"{out} already exists; remove it or choose another")
    series = load_series(target, tier)
    if not series.entries:
        raise ExportError(f"{series.series_file} lists no patches; nothing to export")
    evidence, warnings = gather_evidence(target, tier, series, verdict_path)
    default = {entry.patch for entry in load_series(target, "default").entries}
    optional = {
        number
        for number, entry in enumerate(series.entries, 1)
        if entry.patch not in default
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="harness-export-") as scratch:
        repo = Path(scratch) / "vllm"
        base = commit_pristine(target, repo)
        commits = apply_as_commits(repo, series)
        warnings += submission_warnings(repo, base, series, commits)
        blurb = cover_blurb(
            target, tier, patch_subjects(repo, commits), optional, evidence
        )
        with tempfile.TemporaryDirectory(
            dir=out.parent, prefix=f".{out.name}-"
        ) as work:
            mails = Path(work) / "mails"
            format_patches(repo, base, commits[0], mails)
            fill_cover_letter(mails / "0000-cover-letter.patch", SERIES_TITLE, blurb)
            mails.rename(out)
    return sorted(out.iterdir()), warnings


def gather_evidence(
    target: Target, tier: str, series: Series, verdict_path: Path | None
) -> tuple[list[str] | None, list[str]]:
    """The verdict's lines for the letter (None if there is none), and warnings."""
    verdict_path = verdict_path or default_verdict(target, tier)
    rerun = f"`python -m harness test --target {target.name} --tier {tier}`"
    if verdict_path is None:
        return None, [
            f"no verdict for target {target.name} tier {tier} in "
            f"{cache_dir() / 'reports'}; the cover letter says so. Run {rerun} first."
        ]
    verdict = read_verdict(verdict_path, target, tier)
    warnings = []
    if not verdict.get("passed"):
        warnings.append(f"the verdict {verdict_path} is a FAIL")
    inputs = [series.series_file, *map(series.patch_path, series.entries)]
    if verdict_path.stat().st_mtime < max(path.stat().st_mtime for path in inputs):
        warnings.append(
            f"the verdict {verdict_path} is older than the series; rerun {rerun}"
        )
    return render_evidence(verdict, verdict_path), warnings


def submission_warnings(
    repo: Path, base: str, series: Series, commits: list[str]
) -> list[str]:
    """What upstream asks for that the series does not do yet."""
    warnings = []
    for entry, commit in zip(series.entries, commits, strict=True):
        if not AI_TRAILER.search(git(repo, "log", "-1", "--format=%B", commit)):
            warnings.append(
                f"{entry.patch} has no Co-authored-by:/Assisted-by: trailer; "
                f"vLLM asks AI-assisted commits to carry one"
            )
    lines = changed_lines_outside_tests(repo, base)
    if lines > RFC_LINE_LIMIT:
        warnings.append(
            f"the series changes {lines} lines outside tests/; vLLM asks for an "
            f"RFC issue first above {RFC_LINE_LIMIT}"
        )
    return warnings


def format_patches(repo: Path, base: str, first: str, mails: Path) -> None:
    # The cover letter is from the series' author, like its patches.
    name, email = git(repo, "log", "-1", "--format=%an%n%ae", first).splitlines()
    git(
        repo,
        "format-patch",
        "--quiet",
        "--cover-letter",
        f"--base={base}",
        "--subject-prefix=PATCH",
        "-o",
        str(mails),
        f"{base}..HEAD",
        env={"GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email},
    )


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "export",
        help="the series as mails (git format-patch, cover letter filled in) "
        "for upstream submission",
    )
    parser.add_argument("--target", required=True)
    parser.add_argument("--tier", choices=TIERS, default="default")
    parser.add_argument(
        "--out", type=Path, required=True, help="new directory for the mails"
    )
    parser.add_argument(
        "--verdict",
        type=Path,
        help="the verdict JSON to quote (default: the newest one "
        "`python -m harness test` wrote for this target and tier)",
    )
    parser.set_defaults(func=_export)


def _export(args) -> int:
    target = get_target(args.target)
    mails, warnings = export_series(target, args.tier, args.out, args.verdict)
    print(f"wrote {len(mails)} mails to {args.out}:")
    for mail in mails:
        print(f"  {mail.name}")
    print(
        "apply them with `git am --keep-non-patch` (skip 0000-cover-letter.patch); "
        "before sending, fill in the DUPLICATE CHECK line of the cover letter"
    )
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0
