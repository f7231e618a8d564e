"""What the pull-request description says, section by section, and which of
the template's checklist facts are true; the cover letter of the mails
carries the same sections.

Written from a Submission (harness.series.submission): the patches' subjects
and `Fixes` lines, the verdict's numbers, the fail-before-fix runs and the
related-work record. The sections follow the template's layout (0.32 and
later: Overview, Claims, Validation, Details; older releases: Purpose, Test
Plan, Test Result), which harness.series.pr_template fills. The few
sentences that cannot be derived (what the defect is, why the design) are
the constants below; keep them short, and true of every tier.
"""

import time

from harness.contract import CLASSES, title
from harness.series import pr_template
from harness.series.evidence import PatchEvidence
from harness.series.gitrepo import BRANCH
from harness.series.submission import (
    CHECK_COMMANDS,
    CHECKED_ON,
    EARLIER_FILL_ONLY,
    RELATED_WORK,
    Submission,
)
from harness.trees.env import UPSTREAM_ENV
from harness.verdict import FAILING

PROBLEM = (
    "With `hash_block_size` smaller than a group's `block_size`, a partial "
    "prefix-cache entry's `BlockStored` names as parent a hash boundary that "
    "no KV event reported, so an index built from the stream (NVIDIA Dynamo's "
    "radix tree, llm-d) cannot place it. This PR reports those boundaries as "
    "ordinary `BlockStored` events and removes them when no entry leads "
    "through them any more; the event schema does not change."
)
ROOT_CAUSE = (
    "**Root cause.** `cache_full_blocks()` reports one hash per cache block; "
    "`cache_partial_block()` reports an entry of one hash block whose parent "
    "is the fine-grained boundary before it, which nothing reports."
)
DESIGN = (
    "**Design.** No new fields: adding fields to `BlockStored` changes the "
    "msgpack map header of every payload, which "
    "`tests/distributed/test_kv_cache_events.py` guards against. The added "
    "events are ordinary `BlockStored` events at the hash block size "
    "(`block_size == hash_block_size`, one per contiguous run of boundaries, "
    "parented on the boundary before it), and every event emitted before is "
    "emitted byte for byte. The reported "
    "boundaries are not in the prefix cache, so eviction alone would never "
    "report them gone: they are removed once no cached entry leads through "
    "them, in the same commit that reports them, so that no commit leaves a "
    "stream that leaks."
)
K4_DESIGN = (
    "With K4 fixed, the stores of groups whose skipped blocks are never "
    "announced (sliding window, Mamba align mode), or whose parent block was "
    "evicted in use, are the only events that change: the cached blocks are "
    "stored in runs whose tokens are exactly their hashes', each run under a "
    "block the pool holds, the first block of a run after one it does not "
    "hold spanning the tokens back to the nearest block it holds."
)
NO_MODEL_EVAL = (
    "**Model evaluation.** Not applicable: only KV events change; what is "
    "cached, looked up and computed does not."
)


def render(template: str, submission: Submission) -> tuple[str, list[str]]:
    """The template filled in for the submission, and the sections and
    checklist items it leaves to the submitter."""
    titles = pr_template.section_titles(template)
    return pr_template.fill(template, sections(submission, titles), _facts(submission))


def sections(submission: Submission, titles: set[str]) -> dict[str, str]:
    """Section title (lower case) -> content, for the template's layout:
    vLLM 0.32 and later, or the older Purpose / Test Plan / Test Result."""
    if "purpose" in titles and "overview" not in titles:
        return {
            "purpose": "\n\n".join(
                [overview(submission), claims(submission), details(submission)]
            ),
            "test plan": test_plan(submission),
            "test result": test_result(submission),
        }
    return {
        "overview": overview(submission),
        "claims": claims(submission),
        "validation": test_plan(submission) + "\n\n" + test_result(submission),
        "details": details(submission),
    }


def overview(sub: Submission) -> str:
    lines = [f"{'. '.join(sub.references)}. {PROBLEM}" if sub.references else PROBLEM]
    lines += ["", f"Commits, against {sub.target.source.release_name()}:", ""]
    changed = sub.upstream_tests_changed
    for number, subject in enumerate(sub.subjects, 1):
        notes = ["optional"] if number in sub.optional else []
        notes += [f"changes upstream's `{_name(test)}`" for test in changed[number - 1]]
        lines.append(
            f"{number}. {subject}" + (f" ({'; '.join(notes)})" if notes else "")
        )
    return "\n".join(lines)


def claims(sub: Submission) -> str:
    if sub.verdict is None:
        return (
            "- No verdict was found for this series: no claim here is backed by a run."
        )
    lines = []
    report = _report(sub.verdict.get("conformance", {}))
    classes = _counts(report, "classes")
    workloads = report.get("workloads", "the")
    fixes = sub.target.fixes.get(sub.tier, frozenset())
    for cls in sorted(fixes & classes.keys()):
        counts = classes[cls]
        lines.append(
            f"- {title(cls)} ({CLASSES[cls].summary}): {counts['pristine']} -> "
            f"{counts['patched']} in {workloads} seeded workloads."
        )
    conformance = sub.verdict.get("conformance", {})
    if conformance.get("status") == "passed":
        rewrites = (
            ", except the stores of K4, which it rewrites (every hash they "
            "stored is stored in the same operation, under a parent the pool "
            "holds)"
            if "K4" in fixes
            else ""
        )
        lines.append(
            f"- {title('C7')}: on every workload the patched stream is the "
            "pristine stream byte for byte plus the added stores and their "
            f"removals{rewrites}; no class of violation grows, and removal "
            "soundness, hash fidelity, no leaks and pool fidelity hold."
        )
    tally = sub.verdict.get("pristine", {}).get("tally", {})
    added = sub.verdict.get("added", {})
    failing = [test for test, outcome in added.items() if outcome in FAILING]
    lines.append(
        f"- {title('C8')}: {len(sub.verdict.get('regressions', {}))} regressions "
        f"among the {tally.get('passed', 0)} upstream tests that pass on the "
        f"pristine tree; {len(added)} tests added, {len(failing)} failing."
    )
    return "\n".join(lines)


def test_plan(sub: Submission) -> str:
    selection = (sub.verdict or {}).get("selection", "ci")
    tests = " ".join(sub.target.selection(selection))
    environment = " ".join(f"{key}={value}" for key, value in UPSTREAM_ENV.items())
    harness = (
        f"python -m harness test --target {sub.target.name} --tier {sub.tier} "
        f"--selection {selection}"
    )
    return "\n".join(
        [
            f"CPU only: {sub.target.source.release_name()} as released, and "
            "this branch. vLLM's tests, on each tree:",
            "",
            "```",
            f"{environment} PYTHONPATH=. python -m pytest {tests}",
            "```",
            "",
            "The verdict below ran that selection on both trees, and replayed "
            "seeded workloads from both against the stream contract, with this "
            f"series' harness (not part of this PR): `{harness}`. The "
            "fail-before-fix commands are under each commit below, on the "
            f"branch `{BRANCH}`.",
        ]
    )


def test_result(sub: Submission) -> str:
    lines = (
        _verdict_lines(sub)
        if sub.verdict is not None
        else [
            "No verdict was found for this target and tier; vLLM's tests and the "
            "stream-contract replay have not been run for this description."
        ]
    )
    lines += ["", *_evidence_lines(sub)]
    return "\n".join(lines)


def _verdict_lines(sub: Submission) -> list[str]:
    verdict = sub.verdict
    written = time.strftime("%Y-%m-%d", time.gmtime(sub.verdict_path.stat().st_mtime))
    pristine = verdict.get("pristine", {}).get("tally", {})
    patched = verdict.get("patched", {}).get("tally", {})
    lines = [
        f"**vLLM's tests** (verdict of {written}: "
        f"{'PASS' if verdict.get('passed') else 'FAIL'}):",
        "",
        "| outcome | pristine | patched |",
        "| --- | --- | --- |",
    ]
    lines += [
        f"| {outcome} | {pristine.get(outcome, 0)} | {patched.get(outcome, 0)} |"
        for outcome in ("passed", "failed", "skipped")
    ]
    regressions = verdict.get("regressions", {})
    lines += [
        "",
        f"Regressions: {len(regressions)}. Failing on both trees (this machine, "
        f"not the change): {len(verdict.get('environmental', {}))}.",
    ]
    lines += [
        f"- `{test}`: {' -> '.join(outcomes)}" for test, outcomes in regressions.items()
    ]
    if sub.verdict_gaps:
        lines.append(
            f"This verdict has no outcome for {len(sub.verdict_gaps)} test(s) "
            "these commits add: it was made for another revision of them."
        )
    lines += ["", *_conformance_lines(verdict.get("conformance", {}))]
    return lines


def _report(conformance: dict) -> dict:
    """What the conformance suite reported (free-form: keys may be missing)."""
    report = conformance.get("report")
    return report if isinstance(report, dict) else {}


def _counts(report: dict, table: str) -> dict[str, dict]:
    """The conformance report's ``table`` (classes, rules): id -> its pristine
    and patched counts, leaving out anything else the report holds."""
    found = report.get(table)
    return {
        key: counts
        for key, counts in (found if isinstance(found, dict) else {}).items()
        if isinstance(counts, dict) and {"pristine", "patched"} <= counts.keys()
    }


def _conformance_lines(conformance: dict) -> list[str]:
    report = _report(conformance)
    lines = [
        f"**Stream contract** ({conformance.get('status', 'not recorded')}: "
        f"{conformance.get('passed', 0)} passed, {conformance.get('failed', 0)} "
        f"failed): each workload's stream replayed from both trees; occurrences "
        f"per class and rule, pristine -> patched.",
    ]
    rows = [
        (title(key), counts)
        for table in ("classes", "rules")
        for key, counts in _counts(report, table).items()
    ]
    if rows:
        lines += ["", "| class or rule | pristine | patched |", "| --- | --- | --- |"]
        lines += [f"| {name} | {c['pristine']} | {c['patched']} |" for name, c in rows]
    return lines


def _evidence_lines(sub: Submission) -> list[str]:
    if sub.evidence is None:
        return ["**Fail-before-fix:** not run for this description."]
    lines = [
        "**Fail-before-fix**, per commit: its test hunks alone on the commit "
        "before it, then the whole commit.",
    ]
    for item in sub.evidence:
        lines += ["", *_evidence_block(item, sub.count)]
    return lines


def _evidence_block(item: PatchEvidence, count: int) -> list[str]:
    summary = f"{item.number}/{count} {item.subject}: {item.finding()}"
    if item.before is None or item.after is None:
        return [f"- {summary}"]
    lines = ["<details>", f"<summary>{summary}</summary>", "", "```console"]
    for run in (item.before, item.after):
        lines += [f"$ {command}" for command in run.commands]
        # A run that passed says so in its summary line; its PASSED lines
        # would only repeat the command's test ids.
        lines += [
            line
            for line in run.lines
            if not (run.passed and line.startswith("PASSED "))
        ]
    return [*lines, "```", "</details>"]


def details(sub: Submission) -> str:
    design = DESIGN
    if "K4" in sub.target.fixes.get(sub.tier, frozenset()):
        design = design.replace(
            "and every event emitted before is emitted byte for byte",
            "and every other event emitted before is emitted byte for byte",
        )
        design += " " + K4_DESIGN
    parts = [ROOT_CAUSE, design, _limitations(sub), NO_MODEL_EVAL]
    parts += [duplicate_check(sub), ai_statement(sub)]
    return "\n\n".join(part for part in parts if part)


def _limitations(sub: Submission) -> str:
    report = _report((sub.verdict or {}).get("conformance", {}))
    left = {
        cls: counts["patched"]
        for cls, counts in _counts(report, "classes").items()
        if cls in CLASSES and counts["patched"]
    }
    if not left:
        return ""
    why = {
        "K5": "vLLM holding one hash in several blocks, which consumers must count",
    }
    for cls in left.keys() - why.keys():
        optional = any(cls in fixed for fixed in sub.target.fixes.values())
        why[cls] = (
            "fixed by optional follow-up commits, not in this PR, as they change "
            "the upstream tests that pin those events"
            if optional
            else "not addressed by these commits"
        )
    items = [f"{title(cls)} ({count}): {why[cls]}" for cls, count in left.items()]
    return "**Limitations.** Still in the patched stream: " + "; ".join(items) + "."


def duplicate_check(sub: Submission) -> str:
    commands = "\n".join(CHECK_COMMANDS)
    lines = [
        f"**Duplicate-work check** (AGENTS.md), last run {CHECKED_ON.isoformat()}:",
        "",
        "```",
        commands,
        "```",
        "",
        *_related_work_lines(sub),
        "",
        EARLIER_FILL_ONLY,
    ]
    return "\n".join(lines)


def _related_work_lines(sub: Submission) -> list[str]:
    """One bullet per related pull request or issue: what it does, and how
    the series stands to it (fixed by the patches that say `Fixes #N`)."""
    lines = []
    for work in RELATED_WORK:
        relation = work.relation
        if work.number in sub.fixed_by:
            patches = ", ".join(f"{n}/{sub.count}" for n in sub.fixed_by[work.number])
            relation = f"fixed by patch {patches}"
        lines.append(f"- #{work.number} {work.what}. Here: {relation}.")
    return lines


def ai_statement(sub: Submission) -> str:
    said = (
        "This PR was prepared with AI assistance (Claude): code, tests and this "
        "description were drafted with it"
    )
    trailer = (
        "; each commit carries a `Co-authored-by:` trailer" if sub.ai_assisted else ""
    )
    return (
        f"**AI assistance.** {said}{trailer}. I, {sub.submitter.name}, reviewed "
        "every changed line and can answer for the change; the results above "
        "come from the commands shown."
    )


def _name(test: str) -> str:
    """A test's name without its file: ``test_x`` or ``TestY::test_x``."""
    return test.split("::", 1)[-1]


def _facts(submission: Submission) -> dict[str, bool]:
    return {
        "pr_checklist_run": False,  # vLLM's /pr-checklist skill is not run here
        "ai_assisted": submission.ai_assisted,
        "validated": submission.validated,
        "always": True,
        "has_verdict": submission.verdict is not None,
    }
