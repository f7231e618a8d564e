"""The pull-request body's numbers: what the verdict, the conformance report
and the fail-before-fix runs say, in plain words (harness.submission.pr_prose)
and with every count read from them.

The conformance report is free-form (keys may be missing or of another
shape): what it does not hold is left out, never made up.
"""

import time

from harness.contract import CLASSES, RULES
from harness.submission import pr_prose
from harness.submission.evidence import PatchEvidence
from harness.submission.submission import Submission
from harness.verdict import FAILING

# The rules a checker applies to one stream (C7 and C8 compare two trees).
STREAM_RULES = ("C1", "C2", "C3", "C4", "C5", "C6")
# The rules whose findings the classes K1-K4 sort by cause.
SORTED_RULES = ("C1", "C3")


def report(verdict: dict | None) -> dict:
    """What the conformance suite reported."""
    found = (verdict or {}).get("conformance", {}).get("report")
    return found if isinstance(found, dict) else {}


def counts(found: dict, table: str) -> dict[str, dict]:
    """The report's ``table`` (classes, rules): id -> its pristine and
    patched counts, leaving out anything else the report holds."""
    rows = found.get(table)
    return {
        key: row
        for key, row in (rows if isinstance(rows, dict) else {}).items()
        if isinstance(row, dict) and {"pristine", "patched"} <= row.keys()
    }


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def class_claims(sub: Submission) -> list[str]:
    found = report(sub.verdict)
    classes = counts(found, "classes")
    workloads = found.get("workloads", "the")
    return [
        f"- {_sentence(pr_prose.plain(cls))}: {classes[cls]['pristine']} -> "
        f"{classes[cls]['patched']} findings in {workloads} seeded workloads "
        "(Validation)."
        for cls in sorted(sub.fixes & classes.keys())
    ]


def stream_claims(sub: Submission) -> list[str]:
    conformance = (sub.verdict or {}).get("conformance", {})
    if conformance.get("status") != "passed":
        return []
    release = sub.target.source.release_name()
    if sub.target.stream(sub.tier) == "holdings":
        wire = (
            f"- Every event {release} emits is still emitted, byte for byte and "
            "in the same order, except the partial entries' stores"
            + (" and the stores after a skipped block" if "K4" in sub.fixes else "")
            + ", which it rewrites (every hash they stored is stored in the same "
            "operation, under a parent the pool holds); no event is added, and "
            "every hash the stream holds is one the pool holds."
        )
    else:
        rewrites = (
            ", except the stores after a skipped or evicted block, which it "
            "rewrites (every hash they stored is stored in the same operation, "
            "under a parent the pool holds)"
            if "K4" in sub.fixes
            else ""
        )
        wire = (
            f"- Every event {release} emits is still emitted, byte for byte and "
            f"in the same order{rewrites}; the added events are stores at the "
            "hash block size and the removals that retire them."
        )
    return [
        wire,
        "- No kind of finding grows, and none of these appears: "
        + "; ".join(pr_prose.plain(rule) for rule in ("C2", "C4", "C5", "C6"))
        + ".",
    ]


def tests_claim(verdict: dict) -> str:
    tally = verdict.get("pristine", {}).get("tally", {})
    added = verdict.get("added", {})
    failing = [test for test, outcome in added.items() if outcome in FAILING]
    return (
        f"- vLLM's tests: {len(verdict.get('regressions', {}))} regressions "
        f"among the {tally.get('passed', 0)} that pass on the release; "
        f"{len(added)} tests added, {len(failing)} failing."
    )


def run_lines(sub: Submission) -> list[str]:
    verdict = sub.verdict
    written = time.strftime("%Y-%m-%d", time.gmtime(sub.verdict_path.stat().st_mtime))
    pristine = verdict.get("pristine", {}).get("tally", {})
    patched = verdict.get("patched", {}).get("tally", {})
    release = sub.target.source.release_name()
    lines = [
        f"**vLLM's tests** (run of {written}: "
        f"{'PASS' if verdict.get('passed') else 'FAIL'}):",
        "",
        f"| outcome | {release} | this branch |",
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
            f"This run has no outcome for {len(sub.verdict_gaps)} test(s) "
            "these commits add: it was made for another revision of them."
        )
    lines += ["", *findings_lines(sub), *router_lines(sub)]
    return lines


def findings_lines(sub: Submission) -> list[str]:
    conformance = sub.verdict.get("conformance", {})
    found = report(sub.verdict)
    release = sub.target.source.release_name()
    lines = [
        f"**The stream** ({conformance.get('status', 'not recorded')}: "
        f"{conformance.get('passed', 0)} checks passed, "
        f"{conformance.get('failed', 0)} failed): findings in the replayed "
        "streams, by cause, then by what is wrong.",
    ]
    rows = [
        (key, row)
        for table in ("classes", "rules")
        for key, row in counts(found, table).items()
        if key in CLASSES or key in RULES
    ]
    if rows:
        lines += ["", f"| finding | {release} | this branch |", "| --- | --- | --- |"]
        lines += [
            f"| {pr_prose.plain(key)} | {row['pristine']} | {row['patched']} |"
            for key, row in rows
        ]
    explained = remaining_explained(found)
    return [*lines, *(["", explained] if explained else [])]


def remaining_explained(found: dict) -> str:
    """How the findings left by cause and by rule count the same
    occurrences, when they do."""
    classes, rules = counts(found, "classes"), counts(found, "rules")
    causes = [cls for cls in ("K1", "K2", "K3", "K4") if cls in classes]
    if not causes or not all(rule in rules for rule in SORTED_RULES):
        return ""
    by_cause = sum(classes[cls]["patched"] for cls in causes)
    by_rule = sum(rules[rule]["patched"] for rule in SORTED_RULES)
    if by_cause != by_rule or not by_cause:
        return ""
    what = " and ".join(
        f"{rules[rule]['patched']} × {pr_prose.plain(rule)}" for rule in SORTED_RULES
    )
    return (
        f"The table counts each finding twice, by where it comes from and by "
        f"what is wrong: the {by_cause} left by cause are the {by_rule} left by "
        f"rule ({what}). Copies of a hash are counted apart: they break no rule."
    )


def router_lines(sub: Submission) -> list[str]:
    """What a router predicts from each stream, over every workload run with
    probe requests, against the engine's own lookup."""
    fidelity = report(sub.verdict).get("fidelity")
    if not isinstance(fidelity, dict) or not fidelity:
        return []
    totals = {"pristine": {}, "patched": {}}
    for trees in fidelity.values():
        for tree, total in totals.items():
            combined = (trees.get(tree) or {}).get("combined") or {}
            for key, value in combined.items():
                total[key] = total.get(key, 0) + value
    if not all(totals[tree].get("probes") for tree in totals):
        return []
    before, after = totals["pristine"], totals["patched"]
    cells = "; ".join(
        f"{label} {before.get(key, 0)} -> {after.get(key, 0)}"
        for key, label in (
            ("exact", "exact"),
            ("over", "over-predicted"),
            ("under", "under-predicted"),
        )
    )
    return [
        "",
        f"**A router's predictions.** A router that indexes each stream and "
        f"applies vLLM's lookup rules, asked for the hit of {after['probes']} "
        "probe requests at quiet points of the workloads, against the engine's "
        f"own lookup: {cells}.",
    ]


def over_prediction(sub: Submission) -> str:
    """The cost a router pays for boundaries the engine cannot serve, if the
    run shows one."""
    lines = router_lines(sub)
    fidelity = report(sub.verdict).get("fidelity") or {}
    grown = sum(
        ((trees.get("patched") or {}).get("combined") or {}).get("over", 0)
        - ((trees.get("pristine") or {}).get("combined") or {}).get("over", 0)
        for trees in fidelity.values()
    )
    if not lines or grown <= 0:
        return ""
    return (
        f"a router over-predicts {grown} more hits than on the release (the "
        "reported boundaries look servable to it, but the engine serves no hit "
        "that ends at one)"
    )


def limitations(sub: Submission) -> str:
    classes = counts(report(sub.verdict), "classes")
    left = [
        f"{row['patched']} × {pr_prose.plain(cls)}: "
        f"{pr_prose.LEFT_BECAUSE.get(cls, pr_prose.LEFT_OTHERWISE)}"
        for cls, row in classes.items()
        if cls in CLASSES and row["patched"] and cls not in sub.fixes
    ]
    costs = [cost for cost in (over_prediction(sub),) if cost]
    if not left and not costs:
        return ""
    said = []
    if left:
        said.append("Still in the stream: " + "; ".join(left) + ".")
    if costs:
        said.append("Cost: " + "; ".join(costs) + ".")
    return "**Limitations.** " + " ".join(said)


# Where a run lifted vLLM 0.34's Triton gate (harness.trees.triton_gate).
GATE = (
    "vLLM 0.34's Triton gate lifted in the run: its CPU platform refuses "
    "every `VllmConfig` on an x86 CPU without triton-cpu, and the submitter's "
    "pytest plugin removes that one check"
)


def validation_lines(sub: Submission) -> list[str]:
    """A part's Validation command as run on its branch at export."""
    run = sub.validation
    if run is None:
        return ["The Validation command was not run for this description."]
    gate = f"; {GATE}" if run.gate == "bypassed" else ""
    lines = [
        f"**The Validation command on this branch** (run at export, CPU{gate}): "
        f"{run.summary or 'pytest printed no summary'}."
    ]
    failing = [line for line in run.lines if line.startswith(("FAILED ", "ERROR "))]
    return [*lines, *(["", "```", *failing, "```"] if failing else [])]


def evidence_lines(sub: Submission) -> list[str]:
    if sub.evidence is None:
        return ["**Each commit's tests, without and with its fix:** not run."]
    gated = any(
        run is not None and run.gate == "bypassed"
        for item in sub.evidence
        for run in (item.before, item.after)
    )
    lines = [
        "**Each commit's tests, without and with its fix**: its test hunks "
        "alone on the commit before it, then the whole commit"
        + (f" ({GATE}, without the fix and with it alike)." if gated else "."),
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
