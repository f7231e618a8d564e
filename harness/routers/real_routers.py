"""Real routers measured by one loop: the `fidelity --router` table.

Each seeded workload run with probes (harness.routers.fidelity_table's
`probe_runs`, every tree of a target) is replayed, by
harness.routers.loop's `measure`, into the two index routers (`HASH_SET`
and `CONTENT_TREE`, always) and into each other consumer asked for, once
per router block size an operator would choose: the hash block size and
each group's cache block size (`block_sizes`). The model of llm-d's rules
(harness.routers.llmd_model) runs in this process; a real router gets a
fresh local publisher (harness.routers.publisher) replaying the run's
recorded stream, and a fresh instance of itself. The table counts exact,
over- and under-predicted requests (mean tokens) per config, tree, router
and block size; the ledger what each router used and dropped of the stream,
by its own reasons; `render_matrix` the same per tree and consumer, every
config together: who gains what.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from harness.contract.records import RunStart
from harness.routers import DEFAULT_PROBES
from harness.routers.fidelity import CELL_HEADERS, Tally
from harness.routers.fidelity_table import probe_runs
from harness.routers.loop import (
    RouterRun,
    content_tree_router,
    hash_set_router,
    measure,
    run_layout,
)
from harness.routers.publisher import StreamPublisher

HASH_SET = "hash-set"
CONTENT_TREE = "content-tree"
LLMD_MODEL = "llm-d-model"
# Measured on every run, once: no block size to choose.
INDEX_ROUTERS = {HASH_SET: hash_set_router, CONTENT_TREE: content_tree_router}


def imported(module: str, name: str):
    """A factory(source, block size) of ``module``'s `Router` class
    ``name``, imported when first called (the routers' wheels are the
    consumers extra)."""

    def make(source, block_size: int):
        return getattr(importlib.import_module(module), name)(source, block_size)

    return make


def llmd_model(records, block_size: int):
    from harness.routers.fidelity import layout_of
    from harness.routers.llmd_model import LlmdModel

    return LlmdModel(layout_of(*run_layout(records)), block_size)


# name -> factory(recorded run, block size) of an in-process `Router`
MODELS = {LLMD_MODEL: llmd_model}
# name -> factory(stream source, block size) of a `Router` with close()
ROUTERS = {
    "dynamo": imported("harness.routers.dynamo_relay", "DynamoRelay"),
    "vllm-router": imported("harness.routers.vllm_router", "VllmRouter"),
}


def block_sizes(start: RunStart) -> dict[int, str]:
    """Router block size -> what it is of the engine's: the hash block, and
    each group's cache block."""
    named: dict[int, list[str]] = {start.hash_block_size: ["hash block"]}
    for group, size in enumerate(start.block_sizes):
        named.setdefault(size, []).append(f"group {group} block")
    return {size: ", ".join(names) for size, names in sorted(named.items())}


def attention_block(start: RunStart) -> int:
    """The cache block an operator sets a router to: the largest
    full-attention group's (Dynamo's deployments use the attention block
    size), else group 0's."""
    sizes = [
        size
        for size, kind in zip(start.block_sizes, start.group_kinds, strict=True)
        if kind == "full_attention"
    ]
    return max(sizes) if sizes else start.block_sizes[0]


def choice(size: int, start: RunStart) -> str:
    """Which block a router block size is: 'hash', 'cache' (the attention
    block, `attention_block`) or 'other' (another group's block)."""
    if size == start.hash_block_size:
        return "hash"
    return "cache" if size == attention_block(start) else "other"


def run_real_router(name: str, records, block_size: int) -> RouterRun:
    if name in MODELS:
        return measure(records, MODELS[name](records, block_size))
    with StreamPublisher() as publisher:
        router = ROUTERS[name](publisher, block_size)
        try:
            return measure(records, router)
        finally:
            router.close()


@dataclass
class Cell:
    """One (config, tree, router, block size) over its seeds."""

    tally: Tally = field(default_factory=Tally)
    ledger: Counter = field(default_factory=Counter)
    events: int = 0
    batches: int = 0
    runs: list[RouterRun] = field(default_factory=list)

    def add(self, run: RouterRun) -> None:
        self.tally.merge(run.tally())
        self.ledger.update(run.ledger)
        self.events += run.events
        self.batches += run.batches
        self.runs.append(run)


@dataclass
class RoutersTable:
    seeds: int
    ops: int
    probes: int
    # (config, tree, router, block size, 'hash'|'cache'|'') -> Cell
    cells: dict[tuple[str, str, str, int, str], Cell] = field(default_factory=dict)
    caption: str | None = None  # the table's first line, when not the default

    def add(self, config, tree, router, size, kind, run: RouterRun) -> None:
        self.cells.setdefault((config, tree, router, size, kind), Cell()).add(run)

    def totals(self) -> dict[tuple[str, str, str], Cell]:
        """(router, block choice, tree) -> every config together."""
        found: dict[tuple[str, str, str], Cell] = {}
        for (_, tree, router, _, kind), cell in self.cells.items():
            total = found.setdefault((router, kind, tree), Cell())
            total.tally.merge(cell.tally)
            total.ledger.update(cell.ledger)
            total.events += cell.events
            total.batches += cell.batches
        return found


def measure_routers(
    trees: dict[str, Path],
    configs: Iterable[str],
    seeds: int,
    ops: int,
    routers: Iterable[str],
    probes: int = DEFAULT_PROBES,
) -> RoutersTable:
    table = RoutersTable(seeds, ops, probes)
    for config, tree, records, _ in probe_runs(trees, configs, seeds, ops, probes):
        add_run(table, config, tree, records, routers)
    return table


def add_run(
    table: RoutersTable, config: str, tree: str, records, routers: Iterable[str]
) -> None:
    """One recorded run with probes, replayed into the index routers and
    each of ``routers`` at every router block size."""
    start, _ = run_layout(records)
    for name, make in INDEX_ROUTERS.items():
        table.add(config, tree, name, 0, "", measure(records, make(records)))
    for name in routers:
        if name in INDEX_ROUTERS:
            continue
        for size in block_sizes(start):
            run = run_real_router(name, records, size)
            table.add(config, tree, name, size, choice(size, start), run)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def render(table: RoutersTable) -> str:
    headers = ["config", "tree", "router", "block size", *CELL_HEADERS]
    caption = table.caption or (
        f"Real routers: {table.seeds} seeds x {table.ops} operations per config, "
        f"{table.probes} probes per quiet point, predictions bounded by "
        "num_tokens - 1 at the alignment. over/under: probes (mean tokens)."
    )
    lines = [
        caption,
        "",
        "Who gains what: per tree and consumer, every config together; exact "
        "requests of all · over-predicted (+tokens) · under-predicted (-tokens).",
        "",
        render_matrix(table),
        "",
        _row(headers),
        _row(["---"] * 4 + ["---:"] * len(CELL_HEADERS)),
    ]
    for (config, tree, router, size, kind), cell in table.cells.items():
        label = f"{size} ({kind})" if size else "-"
        lines.append(_row([f"`{config}`", tree, router, label, *cell.tally.cells()]))
    for (router, kind, tree), cell in table.totals().items():
        label = f"{kind} block" if kind else "-"
        lines.append(_row(["**all**", tree, router, label, *cell.tally.cells()]))
    lines += ["", render_ledgers(table)]
    return "\n".join(lines)


def consumer_label(router: str, kind: str) -> str:
    """A consumer as the matrix names it: the router, and which block size
    it runs at where it has one to choose."""
    return f"{router}, {kind} block" if kind else router


def matrix_cell(tally: Tally) -> str:
    """exact requests of all; over n (+tokens); under n (-tokens)."""
    return (
        f"{tally.exact}/{tally.probes} · {tally.over} (+{tally.over_tokens}) · "
        f"{tally.under} (-{tally.under_tokens})"
    )


def render_matrix(table: RoutersTable) -> str:
    """Tree by consumer, every config together: exact of all requests,
    over-predicted requests (tokens over), under-predicted (tokens under).
    A router with a block size to choose is shown at the hash and at the
    attention cache block, each config once (not at other groups' blocks)."""
    totals = table.totals()
    trees = list(dict.fromkeys(tree for _, _, tree in totals))
    consumers = list(
        dict.fromkeys((router, kind) for router, kind, _ in totals if kind != "other")
    )
    lines = [
        _row(["consumer", *trees]),
        _row(["---"] + ["---:"] * len(trees)),
    ]
    for router, kind in consumers:
        cells = [
            matrix_cell(totals[router, kind, tree].tally)
            if (router, kind, tree) in totals
            else "-"
            for tree in trees
        ]
        lines.append(_row([consumer_label(router, kind), *cells]))
    return "\n".join(lines)


def render_ledgers(table: RoutersTable) -> str:
    """Per router and block choice: what it used and dropped, per tree."""
    totals = table.totals()
    lines = []
    for router, kind in dict.fromkeys((r, k) for r, k, _ in totals):
        trees = [tree for r, k, tree in totals if (r, k) == (router, kind)]
        ledgers = {tree: totals[router, kind, tree].ledger for tree in trees}
        names = sorted({name for ledger in ledgers.values() for name in ledger})
        title = consumer_label(router, kind)
        lines += [f"{title}: its own counts, every config together", ""]
        lines += [_row(["count", *trees]), _row(["---"] + ["---:"] * len(trees))]
        events = [str(totals[router, kind, tree].events) for tree in trees]
        lines.append(_row(["events published", *events]))
        for name in names:
            lines.append(_row([name, *(str(ledgers[t][name]) for t in trees)]))
        lines.append("")
    return "\n".join(lines)


def render_answers(run: RouterRun, limit: int | None = None) -> str:
    """One run's requests: the engine's hit against the router's."""
    lines = [
        _row(
            [
                "op",
                "origin",
                "tokens",
                "engine hit",
                "router raw",
                "predicted",
                "verdict",
            ]
        ),
        _row(["---:", "---", "---:", "---:", "---:", "---:", "---"]),
    ]
    for answer in run.answers[:limit]:
        lines.append(
            _row(
                [
                    str(answer.op),
                    answer.origin,
                    str(answer.num_tokens),
                    str(answer.truth),
                    str(answer.raw),
                    str(answer.predicted),
                    answer.verdict,
                ]
            )
        )
    return "\n".join(lines)
