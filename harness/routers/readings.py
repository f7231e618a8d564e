"""What each consumer that ``fidelity --router`` measures reads of the
stream, as a `Reading` (harness.contract.reading): ``check-stream --for
NAME`` judges a stream by it.

Read from the adapters here and what they measured (docs/consumers.md):

- ``hash-set`` (`HashSetRouter`): every group; the multiset of announced
  hashes, no parent and no token read: only removals can mislead it (C2);
- ``content-tree`` (`ContentTreeRouter`): every group; a store whose parent
  it does not hold is refused (C1); tokens are not read;
- ``dynamo`` (`DynamoRelay`, Dynamo 1.6.1): its relay drops the groups of
  other kinds than full, MLA and sink attention, and empties every store
  whose ``block_size`` is not its ``kv_block_size``; its indexer refuses a
  store under a parent it does not hold (C1) and hashes each block's tokens
  itself (C3);
- ``llm-d-model`` (`LlmdModel`): attention groups only; a store that is not
  dense is skipped (C3) and one whose parent does not map is dropped (C1);
- ``vllm-router`` (`VllmRouter`, 0.1.17): looks a request up in group 0
  only, whatever its kind; keys each block by its tokens (C3), skips a store
  under a parent it has no anchor for (C1), and refuses a whole batch that
  holds a store with no hash, in any group.

Every one of them empties its index on ``AllBlocksCleared``, as the check's
views do (measured for the two real routers: the strict tier's reset,
published at once, ends their stale predictions after a reset). What the
check does not model: Dynamo keeps its attention groups in one tree and
llm-d maps engine keys medium-wide, where the check keeps a view per group;
llm-d's canonical block size (a store shorter than it yields no key, so a
store under it does not map); vllm-router's lookup block size (a store of
another size is kept as an anchor but never matched); whether a reset
reached the stream before the next request (C9), which a stream alone
cannot show.
"""

from __future__ import annotations

from harness.contract.reading import Reading
from harness.routers import CONSUMER_NAMES

ATTENTION_KINDS = frozenset({"full_attention", "mla_attention", "sink_full_attention"})
PARENTS_AND_TOKENS = frozenset({"C1", "C2", "C3"})


def reading(name: str, block_size: int | None = None) -> Reading:
    """Consumer ``name``'s reading; ``block_size`` is Dynamo's
    ``kv_block_size`` (the others take none)."""
    if name not in CONSUMER_NAMES:
        raise ValueError(f"no consumer {name!r}: one of {', '.join(CONSUMER_NAMES)}")
    return READINGS[name](block_size)


def _hash_set(_) -> Reading:
    return Reading(
        "hash-set",
        "the hash set: every announced hash per (medium, group), vLLM's lookup",
        rules=frozenset({"C2"}),
        judged="every group; removals (C2)",
        left_out="parents (C1: it needs none) and tokens (C3: it reads none)",
    )


def _content_tree(_) -> Reading:
    return Reading(
        "content-tree",
        "the content tree: the hash set, refusing a store under a parent it "
        "does not hold",
        rules=frozenset({"C1", "C2"}),
        judged="every group; parents (C1) and removals (C2)",
        left_out="tokens (C3: it reads none)",
    )


def _dynamo(block_size: int | None) -> Reading:
    return Reading(
        "dynamo",
        f"NVIDIA Dynamo 1.6.1's relay and indexer at kv_block_size {block_size}",
        kinds=ATTENTION_KINDS,
        block_size=block_size,
        rules=PARENTS_AND_TOKENS,
        judged=(
            f"attention groups (full, MLA, sink), stores of {block_size}-token "
            "blocks: parents (C1), removals (C2), tokens (C3)"
        ),
        left_out=(
            "other groups (its relay drops them) and stores of another block "
            "size (its relay empties them)"
        ),
    )


def _llmd(_) -> Reading:
    return Reading(
        "llm-d-model",
        "the model of llm-d's rules (harness/routers/llmd_model.py)",
        kinds=ATTENTION_KINDS,
        rules=PARENTS_AND_TOKENS,
        judged=(
            "attention groups (full, MLA, sink): parents (C1), removals (C2), "
            "dense stores (C3)"
        ),
        left_out="other groups (it skips their stores)",
    )


def _vllm_router(_) -> Reading:
    return Reading(
        "vllm-router",
        "vllm-router 0.1.17's kv_aware policy",
        groups=frozenset({0}),
        rules=PARENTS_AND_TOKENS,
        refuses_hashless_batches=True,
        judged=(
            "group 0, of any kind (it looks requests up there only): parents "
            "(C1), removals (C2), tokens (C3); in every group, a store with no "
            "hash (C3), for which it refuses the whole batch"
        ),
        left_out="other groups but their stores with no hash",
    )


READINGS = {
    "hash-set": _hash_set,
    "content-tree": _content_tree,
    "dynamo": _dynamo,
    "llm-d-model": _llmd,
    "vllm-router": _vllm_router,
}
