"""The prose of the pull-request description, in one place.

Everything a reviewer reads that is not a number: what the defect is, why
the design, and how each rule and class of docs/contract.md reads in plain
words (the body never leaves the harness's ids unexplained). What depends
on a measurement is a function of it (the wire paragraph); what depends on
the export is chosen by the classes it fixes (`design`). Keep each sentence
true of every series that harness/targets.toml can name.
"""

from harness.submission.wire_header import WireFacts

PROBLEM = (
    "With `hash_block_size` smaller than a KV cache group's `block_size`, the "
    "`BlockStored` event of a partial prefix-cache entry names as its parent a "
    "hash boundary that no KV event reported, so a router that indexes the "
    "stream cannot place the entry. This PR makes every parent the stream "
    "names one it holds, and gives `BlockStored` no new field."
)
ROOT_CAUSE = (
    "**Root cause.** `cache_full_blocks()` reports one hash per cache block; "
    "`cache_partial_block()` registers a partial entry under its own hash "
    "only, but reports it as one hash block whose parent is the fine-grained "
    "boundary before it, which nothing reports and no lookup can end at."
)
# The design paragraph, by what the tier's stream is (harness/targets.toml
# `streams`, docs/contract.md "Two kinds of stream").
DESIGN = {
    "ancestry": (
        "**Design.** The boundaries the entry's event names are reported as "
        "ordinary `BlockStored` events at the hash block size (one per "
        "contiguous run, parented on the boundary before it), then the "
        "entry's own store, unchanged, then one `BlockRemoved` per boundary: "
        "the pool serves no hit that ends at them, so a consumer places the "
        "entry and afterwards holds nothing the pool does not. Every event "
        "emitted before is emitted byte for byte."
    ),
    "holdings": (
        "**Design.** The stream announces exactly what the pool holds. A "
        "partial entry is stored from the start of its cache block, under "
        "the hash that ends there (`block_size` is the span, one hash, as a "
        "full block's store with an unusual size), so no boundary that no "
        "lookup ends at is ever announced, and no event is added."
    ),
}
# A sentence per class an export may fix beyond the first registration,
# added to the design when the export fixes it, by the tier's stream.
DESIGN_BY_CLASS = {
    "ancestry": {
        "K2": (
            "An entry inside the first cache block gets its chain from the "
            "root, the first boundary without a parent."
        ),
        "K3": (
            "A promotion to a later boundary is reported like a first registration."
        ),
        "K4": (
            "The stores of groups whose skipped blocks are never announced "
            "(sliding window, Mamba align mode) give each block the span "
            "since the block its call cached before it: every store dense, "
            "under the block before it."
        ),
    },
    "holdings": {
        "K2": "An entry inside the first cache block is stored from the root.",
        "K3": (
            "A promoted entry is stored from its block start too, not under "
            "the entry just removed."
        ),
        "K4": (
            "The stores of groups whose skipped blocks are never announced "
            "(sliding window, Mamba align mode) give each block the span "
            "since the block its call cached before it, the span as "
            "block_size: every store dense, under the block before it. A "
            "block after an evicted full-attention block is left as "
            "released: no hit can reach past it."
        ),
    },
}
RESET = (
    "A prefix-cache reset's events are published when the reset happens, "
    "not with the output of the step after it, so that a router sees the "
    "reset before it routes the next request."
)
NO_MODEL_EVAL = (
    "**Model evaluation.** Not applicable: only KV events change; what is "
    "cached, looked up and computed does not."
)
WORKLOADS = (
    "seeded workloads (random mixes of requests, partial entries, promotions, "
    "evictions and resets driven through vLLM's own `BlockPool` and "
    "`KVCacheManager`, each replayed from both trees)"
)
# How each rule and class of docs/contract.md reads in the body: a finding
# is an occurrence in the replayed streams.
PLAIN = {
    "C1": "a store whose parent is not live",
    "C2": "a removal of a hash that is not live",
    "C3": "a store whose hashes and tokens differ in length",
    "C4": "a hash that its tokens do not reproduce",
    "C5": "a hash left live once everything is evicted",
    "C6": "a hash the pool holds that is not live",
    "K1": "a partial entry's first registration whose parent boundary no "
    "event reported",
    "K2": "a partial entry inside the first cache block",
    "K3": "a partial entry promoted to a later boundary",
    "K4": "a store after a block no event announced (a skipped sliding-window "
    "or Mamba block)",
    "K5": "a hash stored again while live (several physical copies)",
    "K6": "a store after a full-attention block evicted while in use",
    "K7": "a partial entry whose parent boundary another KV cache group holds",
    "C9": "a reset that reaches the stream after the next request",
}
# What is left in the patched stream of a class the export does not fix.
LEFT_BECAUSE = {
    "K5": "vLLM holds one hash in several blocks, and consumers must count copies",
    "K6": "no hit can reach past an evicted full-attention block, and a store "
    "spanning it would tell a router its tokens are cached",
    "K7": "removing the reported boundary would drop the other group's block "
    "in a consumer that keeps every group in one index",
}
LEFT_OTHERWISE = "not addressed by these commits"


def design(fixes: frozenset[str], stream: str = "ancestry") -> str:
    """The design paragraph for an export of a tier whose stream is
    ``stream`` that fixes ``fixes``; every tier also publishes a reset at
    once (0001, docs/contract.md, C9)."""
    by_class = DESIGN_BY_CLASS[stream]
    extra = [by_class[cls] for cls in sorted(fixes) if cls in by_class]
    return " ".join([DESIGN[stream], *extra, RESET])


def wire_paragraph(facts: WireFacts | None, change: str = "this PR") -> str:
    """What adding fields would do to the wire on the target, as measured;
    ``change`` names the change that adds no field."""
    if facts is None:
        return ""
    header, extended = WireFacts.header(facts.encoded), WireFacts.header(facts.extended)
    measured = (
        f"**Wire format** (measured with msgspec on {facts.release}'s "
        f"`vllm/distributed/kv_events.py`). `BlockStored` declares "
        f"{facts.fields} fields, and msgspec sizes a tagged struct's map header "
        f"from the fields it declares: a minimal store starts with `{header}` "
        f"({WireFacts.header_kind(facts.encoded)}, {facts.size} bytes)"
    )
    if facts.unchanged:
        return (
            f"{measured}, and with two more optional fields left unset it "
            f"encodes to the same {facts.size} bytes. So on this release new "
            "optional fields would not change a byte of today's events either; "
            f"what {change} keeps by adding none is that consumers get the fix "
            "through the events they already read, with no change."
        )
    return (
        f"{measured}; with two more optional fields left unset it starts with "
        f"`{extended}` ({WireFacts.header_kind(facts.extended)}, "
        f"{facts.extended_size} bytes). New fields would change the bytes of "
        f"every store on this release; {change} adds none."
    )


def plain(entry_id: str) -> str:
    """``a store whose parent is not live`` for C1; the id itself otherwise."""
    return PLAIN.get(entry_id, entry_id)
