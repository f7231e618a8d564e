"""The KV-event stream contract (docs/contract.md): its rules and classes.

One table names every rule and every class, so that each report (the
verdict, the conformance suite, check-stream, the consumers table) prints the
same names. The modules of this package hold the contract as code and import
no vLLM:

- `wire`: vLLM's event structs as they are on the wire, and their decoding;
- `checker`: `StreamChecker`, which replays a stream and reports violations
  of C1-C6 with minimal witnesses (`violation`: a finding; `chain`: C4;
  `quiet`: C5 and C6);
- `reading`: what one consumer reads of the stream, and K6's shape;
  `judgement`: a checked stream's findings sorted for its tier and a
  consumer (check-stream's report and status);
- `records`: the workload record files that the runs write and the checks
  read;
- `classes`: a workload's violations sorted into K1-K5, and C7 between a
  pristine and a patched run;
- `subscribe`: a live stream from vLLM's ZMQ publisher;
- `replay`: vLLM's replay endpoint, for what a subscriber missed.

The routers built from the stream are in harness.routers.

This module needs only the standard library.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    """A rule or a class: its id (C1, K3), its name and what it says."""

    id: str
    name: str
    summary: str

    @property
    def title(self) -> str:
        return f"{self.id} {self.name}"


def _table(*entries: Entry) -> dict[str, Entry]:
    return {entry.id: entry for entry in entries}


RULES = _table(
    Entry(
        "C1",
        "parent closure",
        "every BlockStored parent is None or live when the store is applied",
    ),
    Entry("C2", "removal soundness", "every removed hash is live when it is removed"),
    Entry(
        "C3",
        "span consistency",
        "len(block_hashes) * block_size == len(token_ids)",
    ),
    Entry(
        "C4",
        "hash fidelity",
        "each hash is the chain hash of the tokens along its parent chain",
    ),
    Entry("C5", "no leaks", "once everything is evicted, nothing is live"),
    Entry(
        "C6",
        "pool fidelity",
        "every hash the pool holds is live; every other live hash is an "
        "ancestor of a held one",
    ),
    Entry(
        "C7",
        "wire compatibility",
        "the patched stream is the pristine stream, byte for byte, plus "
        "ancestry stores and their removals, or with its partial-entry stores "
        "rewritten to the pool's holdings",
    ),
    Entry(
        "C8",
        "upstream tests preserved",
        "every upstream test that passes pristine passes patched",
    ),
    Entry(
        "C9",
        "timeliness",
        "an operation's events reach the stream before the engine admits a "
        "request that depends on them",
    ),
)

CLASSES = _table(
    Entry(
        "K1",
        "unreported ancestry",
        "a partial entry's first registration past the first cache block, "
        "whose block start the pool holds, names a boundary no event reported",
    ),
    Entry(
        "K2",
        "first-block partial entry",
        "a partial entry inside the first cache block names a boundary "
        "before any reported hash",
    ),
    Entry(
        "K3",
        "promotion",
        "a partial entry promoted to a later boundary names the hash just "
        "removed, or a boundary no event reported",
    ),
    Entry(
        "K4",
        "nothing live to hang from",
        "skipped (null or masked) blocks are never announced, or a partial "
        "entry ends its cache block",
    ),
    Entry("K5", "physical copies", "a hash stored again while it is live"),
    Entry(
        "K6",
        "unheld parent",
        "a store names a parent block (or an entry's block start) the pool "
        "no longer held when its call began: evicted while in use, or, in a "
        "sliding-window or Mamba group, skipped before the call",
    ),
    Entry(
        "K7",
        "shared boundary",
        "a partial entry like K1's names a boundary that another KV cache "
        "group holds, so reporting it would touch that group's hash",
    ),
)


def title(entry_id: str) -> str:
    """``C1 parent closure`` for a known id, the id itself otherwise."""
    entry = RULES.get(entry_id) or CLASSES.get(entry_id)
    return entry.title if entry else entry_id
