"""The cover letter of an export: the problem, the series and the evidence.

The evidence is the newest verdict `python -m harness test` wrote for the
same target and tier (or a plain statement that there is none), rendered as
plain text: vLLM's own tests on both trees, and the conformance suite's
counts per class and rule; then one line per patch of the fail-before-fix
runs (harness.series.evidence), the related work (harness.series.related),
and who submits the series and how AI assisted it.

A verdict file is checked before any work: a verdict `python -m harness test`
wrote (harness.verdict.read_verdict), for the same target and tier.
"""

import textwrap
import time
from pathlib import Path

from harness import cache
from harness.contract import title
from harness.errors import ExportError, UnreadableInput
from harness.series.model import Series
from harness.series.related import (
    CHECK_COMMANDS,
    CHECKED_ON,
    EARLIER_FILL_ONLY,
    related_work_lines,
)
from harness.series.submission import Submission
from harness.targets import SELECTIONS, Target
from harness.verdict import FAILING
from harness.verdict import read_verdict as verdict_file

PROBLEM = """\
With a hash block size smaller than a group's block size (hybrid KV caches),
BlockPool.cache_partial_block() reports a partial prefix-cache entry whose
parent is a hash boundary that no KV event ever reported. A consumer that
rebuilds the prefix tree from the event stream cannot attach such an entry:
NVIDIA Dynamo's radix-tree indexer rejects the store ("Failed to find parent
block") and llm-d indexes it as an orphan. The series reports the missing
boundaries as BlockStored events at the hash block size, removes them when
no entry leads through them any more, and leaves every event emitted before
byte for byte as it was.
"""
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


def default_verdict(target: Target, tier: str) -> Path | None:
    """The newest report `python -m harness test` wrote for target and tier."""
    found = [
        path
        for selection in SELECTIONS
        if (path := cache.report(target.name, tier, selection)).is_file()
    ]
    return max(found, key=lambda path: path.stat().st_mtime) if found else None


def read_verdict(path: Path, target: Target, tier: str) -> dict:
    """The verdict at path as `Verdict.as_json` writes it, checked: one line
    naming the file if it cannot be read or is not a verdict
    (harness.verdict.read_verdict), or is for another target or tier."""
    verdict = verdict_file(path)
    if verdict.selection not in SELECTIONS:
        raise UnreadableInput(
            f"{path}: not a verdict of `python -m harness test`: selection "
            f"{verdict.selection!r} is none of {', '.join(SELECTIONS)}"
        )
    if (verdict.target, verdict.tier) != (target.name, tier):
        raise ExportError(
            f"the verdict {path} is for target {verdict.target} tier "
            f"{verdict.tier}, not target {target.name} tier {tier}"
        )
    return verdict.as_json()


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
                f"  {title(name):24} {counts['pristine']!s:>9} {counts['patched']!s:>9}"
                for name, counts in value.items()
            ]
        elif isinstance(value, dict):
            lines += ["", f"  {label}:"]
            lines += [f"    {name}: {item}" for name, item in value.items()]
        else:
            lines += ["", f"  {label}: {value}"]
    return lines


def wrap(paragraph: str, indent: str = "") -> str:
    return textwrap.fill(
        paragraph,
        width=72,
        break_on_hyphens=False,
        initial_indent=indent,
        subsequent_indent=indent + "  " if indent else "",
    )


def cover_blurb(sub: Submission, evidence: list[str] | None) -> str:
    """The cover letter's text: the problem, the patches and the evidence."""
    lines = [PROBLEM.rstrip(), "", f"The series, against {_release(sub)}:", ""]
    for number, subject in enumerate(sub.subjects, 1):
        mark = "  (optional)" if number in sub.optional else ""
        lines.append(f"  {number}/{sub.count} {subject}{mark}")
    if sub.optional:
        lines += [
            "",
            "Patches marked (optional) are outside the project's default tier.",
        ]
    lines += [
        wrap(f"Patch {number}/{sub.count} changes upstream's {test.split('::')[-1]}.")
        for number, tests in enumerate(sub.upstream_tests_changed, 1)
        for test in tests
    ]
    lines.append("")
    if evidence is None:
        lines.append(
            wrap(
                f"No test verdict was found for target {sub.target.name}, tier "
                f"{sub.tier} (`python -m harness test --target {sub.target.name} "
                f"--tier {sub.tier}` writes one), so this letter reports no test "
                "results."
            )
        )
    else:
        lines += evidence
    lines += ["", *fail_before_fix_lines(sub), ""]
    lines += [
        wrap(
            "The patches apply with `git am --keep-non-patch` (plain `git am` "
            "drops the bracketed tags from the subjects). The base-commit below "
            f"is {_release(sub)} as unpacked from {sub.target.source.describe()}, "
            "committed with a fixed identity and date."
        ),
        "",
        f"Related work, last checked {CHECKED_ON.isoformat()} with:",
        *(f"  {command}" for command in CHECK_COMMANDS),
        *(wrap(line, "  ") for line in related_work_lines(sub.fixed_by, sub.count)),
        wrap(EARLIER_FILL_ONLY),
        "",
        wrap(
            "AI assistance: this series was prepared with AI assistance "
            f"(Claude). {sub.submitter.name} reviewed every changed line and "
            "submits it; every patch carries their Signed-off-by: under the "
            "Developer Certificate of Origin 1.1 (the DCO file at the top of the "
            "vLLM tree)."
        ),
    ]
    return "\n".join(lines)


def fail_before_fix_lines(sub: Submission) -> list[str]:
    if sub.evidence is None:
        return ["Fail-before-fix: not run for this letter."]
    lines = [
        "Fail-before-fix, each patch's test hunks alone on the patch before it,",
        "then the whole patch (commands and output in pr-body.md):",
    ]
    lines += [f"  {item.number}/{sub.count} {item.finding()}" for item in sub.evidence]
    return lines


def _release(sub: Submission) -> str:
    return sub.target.source.release_name()


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


def find_verdict(
    target: Target, tier: str, series: Series, verdict_path: Path | None
) -> tuple[dict | None, Path | None, list[str]]:
    """The verdict to quote (checked) and its path, None for both if there is
    none, and warnings."""
    verdict_path = verdict_path or default_verdict(target, tier)
    rerun = f"`python -m harness test --target {target.name} --tier {tier}`"
    if verdict_path is None:
        return (
            None,
            None,
            [
                f"no verdict for target {target.name} tier {tier} in "
                f"{cache.reports()}; the letter and pr-body.md say so. Run "
                f"{rerun} first."
            ],
        )
    verdict = read_verdict(verdict_path, target, tier)
    warnings = []
    if not verdict.get("passed"):
        warnings.append(f"the verdict {verdict_path} is a FAIL")
    inputs = [series.series_file, *map(series.patch_path, series.entries)]
    if verdict_path.stat().st_mtime < max(path.stat().st_mtime for path in inputs):
        warnings.append(
            f"the verdict {verdict_path} is older than the series; rerun {rerun}"
        )
    return verdict, verdict_path, warnings
