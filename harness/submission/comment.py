"""The comment for an open upstream pull request that a change of the
series duplicates or competes with: the change's measurements beside that
pull request's design, offered to it instead of a competing pull request.

Every figure is read from what the export measured on the trees it names
(harness.routers.designs through the export verb, and the calls' cost,
harness.submission.call_cost): the stream's findings by class of
docs/contract.md, per consumer where the `skipped_*` fields make two
consumers read one stream differently; each consumer's predictions against
the engine's own lookup; events and bytes. The prose says what each
column and row is and which command measured it, and nothing the figures
do not show: no figure means no sentence about it.
"""

from harness.submission import call_cost, pr_prose
from harness.submission.pr_part import own_text
from harness.submission.submission import Submission

CLASS_ROWS = ("K1", "K2", "K3", "K4", "K5", "K6", "K7")
CONSUMER_NOTES = {
    "hash-set": "every announced hash per `(medium, group_idx)` with vLLM's lookup",
    "content-tree": "the same lookup, refusing a store whose parent it does not hold",
    "content-tree, reading skipped_*": "the content-tree router fed what a "
    "consumer that reads the `skipped_*` fields reads",
    "llm-d-model": "a model of llm-d's rules written from its source, not llm-d",
    "dynamo": "NVIDIA Dynamo's relay and indexer (ai-dynamo-runtime)",
    "vllm-router": "vllm-router's `kv_aware` policy",
}


def filename(pull: int) -> str:
    return f"comment-{pull}.md"


def render(
    sub: Submission,
    labels: dict[str, str],
    figures: dict | None,
    commands: dict[str, str],
) -> str:
    """The comment: ``labels`` names each measured tree (key -> column
    title: released, the design, the change), ``figures`` is what
    harness.routers.designs measured (None: not measured), ``commands`` the
    commands that measured each table."""
    standing = sub.standing
    pull = standing.pull
    lines = [
        f"**Measurements for #{pull}, offered instead of a competing pull "
        f"request.** The change below {standing.kind} this pull request "
        f"({standing.why}), so I will not open it; here is "
        "what each does to the KV-event stream and its consumers, measured "
        f"side by side on {sub.base_name}, in case it helps here.",
        "",
        f"The trees, each {sub.target.source.release_name()} as released plus:",
        "",
        *(f"- **{title}**: {what}" for title, what in _trees(sub, labels)),
    ]
    if figures is None:
        lines += ["", "Nothing was measured for this comment: no figure is quoted."]
    else:
        lines += ["", *_classes(labels, figures), "", *_consumers(labels, figures)]
    cost = call_cost.paragraph(sub.cost)
    if cost:
        lines += ["", cost]
    lines += ["", *_how(commands)]
    lines += [
        "",
        "<details>",
        "<summary>The change's own description (its commit message)</summary>",
        "",
        own_text(sub),
        "",
        "</details>",
        "",
        "Prepared with AI assistance (Claude); I, "
        f"{sub.submitter.name}, reviewed it and can answer for it.",
    ]
    return "\n".join(lines) + "\n"


def _trees(sub: Submission, labels: dict[str, str]) -> list[tuple[str, str]]:
    standing = sub.standing
    released, design, change = labels.values()
    return [
        (released, "nothing."),
        (
            design,
            f"#{standing.pull}'s design re-implemented from its public "
            "description (its code was not read), the submitter's "
            f"`patches/alternatives/{standing.design}`, whose header says each "
            "choice the description leaves open.",
        ),
        (change, f"{sub.subjects[0]} (its message is below)."),
    ]


def _columns(labels: dict[str, str], trees: dict) -> list[tuple[str, str, str]]:
    """(tree, consumer, title) per column: one per tree, or one per
    consumer where the two read the tree's stream differently."""
    columns = []
    for key, title in labels.items():
        consumers = trees.get(key, {}).get("consumers", {})
        if consumers.get("ignoring") == consumers.get("reading"):
            columns.append((key, "ignoring", title))
        else:
            columns += [
                (key, "ignoring", f"{title}, ignoring `skipped_*`"),
                (key, "reading", f"{title}, reading `skipped_*`"),
            ]
    return columns


def _classes(labels: dict[str, str], figures: dict) -> list[str]:
    trees = figures["trees"]
    columns = _columns(labels, trees)
    workloads = figures["workloads"]
    lines = [
        "**The stream, by class.** Findings of a stream checker replaying each "
        "tree's stream of "
        f"{len(workloads['configs'])} seeded workloads ({workloads['seeds']} "
        f"seed x {workloads['ops']} operations each, through vLLM's own "
        "`BlockPool` and `KVCacheManager`), each class in plain words; "
        "where a tree's `BlockStored` carries `skipped_*` fields, a consumer "
        "that ignores them (as Dynamo's decoder ignores keys it does not "
        "know) and one that reads them are counted apart.",
        "",
        "| | " + " | ".join(title for _, _, title in columns) + " |",
        "| --- |" + " ---: |" * len(columns),
    ]
    for cls in CLASS_ROWS:
        cells = [
            str(trees[key]["consumers"][consumer]["classes"].get(cls, 0))
            for key, consumer, _ in columns
        ]
        lines.append(f"| {cls}: {pr_prose.plain(cls)} | " + " | ".join(cells) + " |")
    for name, cell in (
        ("events", lambda tree: f"{tree['events']:,}"),
        ("bytes", lambda tree: f"{tree['bytes']:,}"),
        (
            "the release's events not emitted byte for byte",
            lambda tree: f"{tree['pristine_events_changed']:,}",
        ),
    ):
        cells = [cell(trees[key]) for key, _, _ in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def _cell(tally: dict | None) -> str:
    if not tally:
        return "-"
    return (
        f"{tally['exact']}/{tally['probes']} · {tally['over']} "
        f"(+{tally['over_tokens']}) · {tally['under']} (-{tally['under_tokens']})"
    )


def _consumers(labels: dict[str, str], figures: dict) -> list[str]:
    workloads = figures["workloads"]
    lines = [
        "**What each consumer predicts**, asked for the hit of "
        f"{workloads['probes']} probe requests at each quiet point of the same "
        "workloads, against the engine's own lookup, every workload together: "
        "exact requests of all · over-predicted (+tokens) · under-predicted "
        "(-tokens). A router with a block size to choose runs at the hash "
        "block and at the attention cache block.",
        "",
        "| consumer | " + " | ".join(labels.values()) + " |",
        "| --- |" + " ---: |" * len(labels),
    ]
    for consumer, trees in figures["matrix"].items():
        cells = [_cell(trees.get(key)) for key in labels]
        lines.append(f"| {consumer} | " + " | ".join(cells) + " |")
    named = [
        f"{name}: {note}{_version(figures, name)}"
        for name, note in CONSUMER_NOTES.items()
        if any(row == name or row.startswith(f"{name}, ") for row in figures["matrix"])
    ]
    lines += ["", "The consumers: " + "; ".join(named) + "."]
    if figures.get("left_out"):
        lines += [
            "",
            f"Not measured: {', '.join(figures['left_out'])}, whose packages "
            f"({figures['missing']}) were not installed where this was "
            "measured.",
        ]
    return lines


def _version(figures: dict, name: str) -> str:
    version = figures.get("versions", {}).get(name)
    return f" {version}" if version else ""


def _how(commands: dict[str, str]) -> list[str]:
    return [
        "**How it was measured**, with the submitter's harness (not part of "
        "vLLM), every figure above in one run of:",
        "",
        f"```\n{commands['export']}\n```",
        "",
        "which runs the same code as these, on the same trees (RELEASED: "
        f"`{commands['released']}`; DESIGN and CHANGE: a copy of it with the "
        "design's file, or the change's patch, applied with `patch -p1`):",
        "",
        f"- the stream by class and consumer: `{commands['classes']}` (the "
        "classes in its JSON);",
        f"- each consumer's predictions (all but the reading row): "
        f"`{commands['consumers']}`, whose `pristine` column is RELEASED.",
    ]
