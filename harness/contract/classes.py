"""Replay a workload's records through the stream checker and sort what it
finds into the contract's classes (docs/contract.md).

A violation is classified by the label of the event it was found at, that is
by the pool operation that emitted it:

- K1: C1 on the entry of a first registration (or replacement) of a partial
  entry past the first cache block, whose cache block starts at a hash the
  pool holds;
- K2: the same inside the first cache block;
- K3: C1 on the entry of a promotion to a later boundary;
- K4: nothing live to hang ancestry from: C1 or C3 on a full-block store in
  a group whose full blocks can be null or masked (sliding window, Mamba),
  whose skipped blocks are announced neither as hashes nor as a parent but
  whose tokens stay in the event; or C1 on a partial entry which ends its
  cache block;
- K5: stores of a hash that was already live (not a violation; reported so
  a change shows); where the pool caches a boundary an ancestry store made
  live, the store is counted apart (the ancestry overlap);
- K6: C1 on a store whose parent block (or cache block start, for an entry)
  the pool no longer held when its call began: evicted in use, or skipped
  before the call in a sliding-window or Mamba group; K7: K1's, another group
  holding a boundary.

Anything else is reported under ``RULE:label`` and is never expected.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from harness.contract import CLASSES as CLASS_TABLE
from harness.contract import RULES as RULE_TABLE
from harness.contract.checker import (
    HashModel,
    StreamChecker,
    Violation,
    sha256_hash_model,
)
from harness.contract.reading import SPARSE_KINDS as SPARSE_GROUP_KINDS
from harness.contract.records import (
    BookkeepingSample,
    OpRecord,
    PoolSnapshot,
    Record,
    RunEnd,
    RunStart,
)
from harness.contract.wire import BlockRemoved, BlockStored, decode_event

CLASSES = tuple(CLASS_TABLE)
# The rules a workload's replay checks; C7 compares two runs, C8 test
# outcomes, C9 a real engine's timing (harness.engine.judge).
RULES = tuple(rule for rule in RULE_TABLE if rule not in ("C7", "C8", "C9"))
# Label (before "@") of the call whose entry store is at fault -> class
# (harness.workloads.labeller names the calls). An entry that ends its cache
# block has nothing live to hang ancestry from: K4, whatever the call; one
# whose block start the pool does not hold is K6 (`classify`).
C1_CLASSES = {
    "partial:first": "K1",
    "partial:replace": "K1",
    "partial:first-shared": "K7",
    "partial:replace-shared": "K7",
    "partial:first-block": "K2",
    "partial:replace-first-block": "K2",
    "partial:promotion": "K3",
    "partial:promotion-first-block": "K3",
} | {f"partial:{kind}-block-end": "K4" for kind in ("first", "replace", "promotion")}
# Calls that began with their parent (block start) held nowhere: C1 is K6.
UNHELD_PARENT_KINDS = {"full-unheld-parent"} | {
    f"partial:{kind}-unheld-start" for kind in ("first", "replace", "promotion")
}


def vllm_hash_model(start: RunStart) -> HashModel:
    """The run's block hash, from the hash block size and NONE_HASH it
    recorded."""
    return sha256_hash_model(
        start.hash_block_size, start.none_hash, start.int_block_hashes
    )


@dataclass
class Run:
    """One workload's records, replayed and classified."""

    start: RunStart
    ops: list[OpRecord]
    checker: StreamChecker
    classes: Counter = field(default_factory=Counter)
    rules: Counter = field(default_factory=Counter)
    # (class or "RULE:label", violation) for every violation, in stream order.
    findings: list[tuple[str, Violation]] = field(default_factory=list)
    # The series' bookkeeping sizes after each operation (None: it has none).
    bookkeeping: list[dict[str, int] | None] = field(default_factory=list)
    # Patched runs: stores where ancestry and the pool's own entries overlap.
    ancestry_overlap: int = 0
    # Per pool snapshot: the (view, hash) pairs live in the stream that the
    # pool does not hold (ancestry boundaries, or hashes a pristine pool
    # stored twice and removed once).
    unheld_live: list[frozenset] = field(default_factory=list)

    def label(self, violation: Violation) -> str:
        return self.ops[violation.batch].events[violation.event].label

    def unclassified(self) -> list[tuple[str, Violation]]:
        return [(name, v) for name, v in self.findings if name not in CLASSES]


def replay(records: list[Record]) -> Run:
    start = records[0]
    assert isinstance(start, RunStart)
    checker = StreamChecker(hash_model=vllm_hash_model(start), track_ancestry=True)
    run = Run(start, [], checker)
    for record in records[1:]:
        if isinstance(record, OpRecord):
            assert record.index == len(run.ops)
            run.ops.append(record)
            checker.apply([decode_event(event.data) for event in record.events])
        elif isinstance(record, PoolSnapshot):
            held = {
                (start.medium, group): set(hashes)
                for group, hashes in record.held.items()
            }
            checker.check_pool(held)
            run.unheld_live.append(
                frozenset(
                    (key, block_hash)
                    for key, live in checker.views.items()
                    for block_hash in live
                    if block_hash not in held.get(key, ())
                )
            )
        elif isinstance(record, BookkeepingSample):
            run.bookkeeping.append(record.sizes)
        elif isinstance(record, RunEnd) and record.drained:
            checker.check_drained()
    for violation in checker.violations:
        name = classify(run, violation)
        run.findings.append((name, violation))
        run.rules[violation.rule] += 1
        if name in CLASSES:
            run.classes[name] += 1
    run.classes["K5"] = checker.duplicate_stores
    return run


def classify(run: Run, violation: Violation) -> str:
    if violation.event is None:
        return violation.rule
    label = run.label(violation)
    kind, _, group_kind = label.partition("@")
    sparse = group_kind in SPARSE_GROUP_KINDS
    if violation.rule == "C1" and kind in UNHELD_PARENT_KINDS:
        return "K6"  # the parent (or block start) was gone before the call
    if violation.rule == "C1" and kind in C1_CLASSES:
        return C1_CLASSES[kind]
    if kind.startswith("full") and violation.rule in ("C1", "C3") and sparse:
        return "K4"
    return f"{violation.rule}:{label}"


# --------------------------------------------------------------------------
# C7: the patched stream keeps every pristine event and only adds ancestry
# --------------------------------------------------------------------------


def wire_differences(
    pristine: Run,
    patched: Run,
    rewrites: frozenset[str] = frozenset(),
    holdings: bool = False,
) -> list[str]:
    """C7 findings, empty when the patched run only adds allowed events.

    A tier whose stream is the pool's holdings (``holdings``) adds no
    ancestry: it may rewrite every pristine partial-entry store (and the
    stores of the classes in ``rewrites``), each rewritten hash stored again
    in the same operation, and add nothing else.

    Per operation, the pristine events must appear byte for byte and in
    order in the patched events. Each added event must be
    - an ancestry run: a store of one or more consecutive boundaries
      (``block_size == hash_block_size``; its parent and hashes are checked
      by C1 and C4 in the replay) emitted by a partial registration (which
      classes each tier must fix, and that no other class grows, is checked
      on the counts);
    - a boundary stored again right after the pool removed its own entry of
      it in the same operation, because some chain still leads through it;
    - or a removal of hashes such stores added.

    A tier that fixes K4 or K6 (``rewrites``) may also rewrite the pristine
    stores of those classes (`rewritable_stores`): they may be missing, every
    hash they stored must be stored by the patched operation, and an added
    store may then carry only their hashes, or be the first boundary of an
    ancestry chain spanning back (one hash, ``block_size`` a multiple of
    ``hash_block_size``).
    """
    findings = []
    if [op.name for op in pristine.ops] != [op.name for op in patched.ops]:
        return ["the two trees ran different operations for the same seed"]
    hbs = patched.start.hash_block_size
    rewritable = rewritable_stores(pristine, rewrites, holdings)
    ancestry: set = set()
    for before, after in zip(pristine.ops, patched.ops, strict=True):
        optional = rewritable.get(before.index, set())
        matches = align(before.events, after.events, optional)
        if matches is None:
            findings.append(f"op {before.index}: pristine events missing or reordered")
            continue
        rewritten = {
            block_hash
            for position, match in enumerate(matches)
            if match is None
            for block_hash in decode_event(before.events[position].data).block_hashes
        }
        added = set(range(len(after.events))) - set(matches)
        removed_here: set = set()
        stored_here: set = set()
        for index, event_record in enumerate(after.events):
            event = decode_event(event_record.data)
            if isinstance(event, BlockStored):
                stored_here.update(event.block_hashes)
            if index not in added:
                if isinstance(event, BlockRemoved):
                    removed_here.update(event.block_hashes)
                continue
            where = f"op {before.index} ({event_record.label})"
            if holdings:
                hashes = set(getattr(event, "block_hashes", None) or ())
                if not (isinstance(event, BlockStored) and hashes <= rewritten):
                    findings.append(
                        f"{where}: added {type(event).__name__} is no rewritten "
                        "pristine store"
                    )
                continue
            if isinstance(event, BlockStored):
                registration = event_record.label.startswith("partial:")
                hashes = set(event.block_hashes)
                restored = bool(hashes) and hashes <= removed_here
                if rewritten and hashes and hashes <= rewritten:
                    continue
                spans_back = (
                    "K4" in rewrites
                    and registration
                    and len(hashes) == 1
                    and event.block_size % hbs == 0
                    and len(event.token_ids) == event.block_size
                )
                if (event.block_size != hbs and not spans_back) or not hashes:
                    findings.append(f"{where}: added store is not an ancestry store")
                elif not (restored or registration):
                    findings.append(
                        f"{where}: added store is neither a partial entry's "
                        "ancestry nor a boundary stored again"
                    )
                ancestry.update(hashes)
            elif isinstance(event, BlockRemoved):
                removed_here.update(event.block_hashes)
                if not set(event.block_hashes) <= ancestry:
                    findings.append(f"{where}: added removal of a non-ancestry hash")
            else:
                findings.append(f"{where}: added {type(event).__name__}")
        if not rewritten <= stored_here:
            findings.append(
                f"op {before.index}: a rewritten pristine store's hash is not stored"
            )
    return findings


# The labels (before "@") of the calls whose stores name a parent the pool
# does not hold (UNHELD_PARENT_KINDS, and an entry that ends its cache block),
# which only a pristine leak can keep live in a view: pristine stores some
# held hashes twice and removes them once.
NAMES_UNHELD_KINDS = UNHELD_PARENT_KINDS | {
    kind for kind, name in C1_CLASSES.items() if name == "K4"
}
REWRITABLE_CLASSES = ("K4", "K6")


def rewritable_stores(
    pristine: Run, rewrites: frozenset[str], partial_entries: bool = False
) -> dict[int, set[int]]:
    """Per operation, the pristine stores a tier may rewrite: those of the
    classes in ``rewrites`` (K4, K6), and those a call of such a class
    emitted that name a parent the pool does not hold although a leak keeps
    it live; where its stream is the pool's holdings, every partial entry's
    store."""
    found: dict[int, set[int]] = {}
    for name, violation in pristine.findings:
        if name in rewrites and name in REWRITABLE_CLASSES:
            found.setdefault(violation.batch, set()).add(violation.event)
    for op in pristine.ops:
        for index, event in enumerate(op.events):
            kind, _, group_kind = event.label.partition("@")
            owner = (
                "K6"
                if kind == "full-unheld-parent" and group_kind not in SPARSE_GROUP_KINDS
                else "K4"
            )
            rewrites_it = (kind in NAMES_UNHELD_KINDS and owner in rewrites) or (
                partial_entries and kind.startswith("partial:")
            )
            if rewrites_it and isinstance(decode_event(event.data), BlockStored):
                found.setdefault(op.index, set()).add(index)
    return found


def align(
    pristine_events,
    patched_events,
    optional: set[int] = frozenset(),
    key: Callable[[Any], Any] = attrgetter("data"),
) -> list[int | None] | None:
    """For each pristine event, the index of the patched event that repeats
    it (byte for byte: the same ``key``, by default the event's bytes),
    matching in order; None for an ``optional`` one with no match (the whole
    result is None if another one has no match)."""
    matches: list[int | None] = []
    start = 0
    for position, wanted in enumerate(pristine_events):
        for index in range(start, len(patched_events)):
            if key(patched_events[index]) == key(wanted):
                matches.append(index)
                start = index + 1
                break
        else:
            if position not in optional:
                return None
            matches.append(None)
    return matches


def matched_events(pristine_events, patched_events) -> set[int]:
    """Indexes of the patched events that repeat a pristine event byte for
    byte, in order; a pristine event the tier rewrote matches none."""
    every = set(range(len(pristine_events)))
    return set(align(pristine_events, patched_events, every)) - {None}


def live_restores(run: Run) -> set[tuple[int, int]]:
    """(op, event) of every store of a hash that was already live (K5)."""
    checker = StreamChecker()
    found = set()
    for op in run.ops:
        for index, record in enumerate(op.events):
            before = checker.duplicate_stores
            checker.apply([decode_event(record.data)])
            if checker.duplicate_stores > before:
                found.add((op.index, index))
    return found


@dataclass(frozen=True)
class LiveStore:
    """A store in the patched stream of a hash already live there that the
    pristine stream does not have."""

    op: int
    event: int
    label: str
    added: bool  # an ancestry store the series added, else a pristine store

    def __str__(self) -> str:
        origin = "added store" if self.added else "pristine store"
        return (
            f"op {self.op} event {self.event}: {origin} ({self.label}) "
            "of a hash already live"
        )


def new_live_stores(pristine: Run, patched: Run) -> list[LiveStore]:
    """Stores of a live hash in the patched stream that the pristine stream
    does not have: added ancestry stores of a live hash, or pristine stores
    that now meet a hash the ancestry made live."""
    before, after = live_restores(pristine), live_restores(patched)
    found = []
    for old, new in zip(pristine.ops, patched.ops, strict=True):
        matches = align(old.events, new.events, set(range(len(old.events))))
        expected = {matches[i] for i in range(len(matches)) if (old.index, i) in before}
        for index, record in enumerate(new.events):
            if (new.index, index) in after and index not in expected:
                found.append(
                    LiveStore(new.index, index, record.label, index not in matches)
                )
    return found


def separate_ancestry_overlap(pristine: Run, patched: Run) -> None:
    """Move the patched run's ancestry overlap out of K5: every store of a
    live hash the pristine stream does not have. With C7 holding, each one
    is an ancestry store of a hash the pool also holds, or a pristine store
    of a hash an ancestry store made live."""
    overlap = len(new_live_stores(pristine, patched))
    patched.ancestry_overlap = overlap
    patched.classes["K5"] -= overlap
