"""The prose of the pull-request description, in one place.

Everything a reviewer reads that is not a number: what the defect is, why
the design, and how each rule and class of docs/contract.md reads in plain
words (the body never leaves the harness's ids unexplained). What depends
on a measurement is a function of it (the wire paragraph); what depends on
the export is chosen by the classes it fixes (`design`). Keep each sentence
true of every series that harness/targets.toml can name.
"""

from harness.series.wire_header import WireFacts

PROBLEM = (
    "With `hash_block_size` smaller than a KV cache group's `block_size`, the "
    "`BlockStored` event of a partial prefix-cache entry names as its parent a "
    "hash boundary that no KV event reported, so a router that indexes the "
    "stream cannot place the entry. This PR reports those boundaries as "
    "ordinary `BlockStored` events and removes them once no cached entry "
    "leads through them; `BlockStored` gets no new field."
)
ROOT_CAUSE = (
    "**Root cause.** `cache_full_blocks()` reports one hash per cache block; "
    "`cache_partial_block()` reports an entry of one hash block whose parent "
    "is the fine-grained boundary before it, which nothing reports."
)
DESIGN = (
    "**Design.** The added events are ordinary `BlockStored` events at the "
    "hash block size (`block_size == hash_block_size`, one per contiguous run "
    "of boundaries, parented on the boundary before it). The reported "
    "boundaries are not in the prefix cache, so eviction alone would never "
    "report them gone: they are removed once no cached entry leads through "
    "them, in the same commit that reports them, so that no commit leaves a "
    "stream that leaks."
)
# A sentence per class an export may fix beyond the first registration,
# added to the design when the export fixes it.
DESIGN_BY_CLASS = {
    "K2": (
        "An entry inside the first cache block gets its chain from the root, "
        "the first boundary without a parent."
    ),
    "K3": (
        "A promotion to a later boundary is reported like a first "
        "registration: the boundaries the old entry led through stay, the new "
        "ones come as one run before the new entry's store."
    ),
    "K4": (
        "The stores of groups whose skipped blocks are never announced "
        "(sliding window, Mamba align mode), or whose parent block was "
        "evicted in use, are the only events that change: the cached blocks "
        "are stored in runs whose tokens are exactly their hashes', each run "
        "under a block the pool holds, the first block of a run after one it "
        "does not hold spanning the tokens back to the nearest block it holds."
    ),
}
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
    "or Mamba block, or one evicted in use)",
    "K5": "a hash stored again while live (several physical copies)",
}
# What is left in the patched stream of a class the export does not fix.
LEFT_BECAUSE = {
    "K5": "vLLM holds one hash in several blocks, and consumers must count copies",
}
LEFT_OTHERWISE = "not addressed by these commits"


def design(fixes: frozenset[str]) -> str:
    """The design paragraph for an export that fixes ``fixes``."""
    extra = [DESIGN_BY_CLASS[cls] for cls in sorted(fixes) if cls in DESIGN_BY_CLASS]
    return " ".join([DESIGN, *extra])


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
