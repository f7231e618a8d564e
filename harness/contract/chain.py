"""Rule C4, hash fidelity: the engine's block hash, rebuilt from a store's
tokens along its parent chain.

Kept apart from the stream checker's replay (harness.contract.checker, which
calls `check_chain` for each store when it is given a `HashModel`): only the
workload replays know the engine's hash function and NONE_HASH; a capture
does not, so check-stream never checks C4.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.contract.wire import BlockStored, ExternalBlockHash


@dataclass(frozen=True)
class HashModel:
    """How the engine derives block hashes, for rule C4.

    ``chunk_hash(parent, tokens, extra_keys)`` is the engine's chained hash of
    one ``hash_block_size`` chunk (``parent`` None for the first chunk);
    ``external`` turns it into the value events carry.
    """

    hash_block_size: int
    chunk_hash: Callable[[bytes | None, tuple[int, ...], Any], bytes]
    external: Callable[[bytes], ExternalBlockHash]


def sha256_hash_model(
    hash_block_size: int, none_hash: bytes, int_block_hashes: bool
) -> HashModel:
    """vLLM's sha256 block hash (vllm.utils.hashing.sha256 applied by
    kv_cache_utils.hash_block_tokens), from the engine's NONE_HASH; events
    carry the low 64 bits as an integer when ``int_block_hashes``."""

    def chunk_hash(parent, tokens, extra_keys):
        chained = (parent or none_hash, tokens, extra_keys)
        return hashlib.sha256(
            pickle.dumps(chained, protocol=pickle.HIGHEST_PROTOCOL)
        ).digest()

    def external(chain: bytes):
        if int_block_hashes:
            return int.from_bytes(chain, "big") & ((1 << 64) - 1)
        return chain

    return HashModel(hash_block_size, chunk_hash, external)


def check_chain(
    model: HashModel,
    chain_values: dict[ExternalBlockHash, bytes],
    event: BlockStored,
) -> tuple[int, ExternalBlockHash, ExternalBlockHash] | None:
    """C4: chain-hash the event's tokens from its parent's chain value; the
    first hash that is not its tokens' chain hash, as ``(index, reported,
    rebuilt)``, or None.

    The parent's chain value was itself rebuilt from the tokens along its
    own parent chain, so this rebuilds the whole prefix. A store whose
    parent's value is unknown (no verified store of it yet) is skipped.
    Every hash verified is added to ``chain_values`` (a hash names its whole
    prefix, so a verified value never goes stale).
    """
    hbs = model.hash_block_size
    block_size = event.block_size
    tokens = event.token_ids
    extra_keys = event.extra_keys or ()
    parent = event.parent_block_hash
    chain = None if parent is None else chain_values.get(parent)
    if (parent is not None and chain is None) or block_size % hbs:
        return None
    for index, block_hash in enumerate(event.block_hashes):
        block_extra = extra_keys[index] if index < len(extra_keys) else None
        start = index * block_size
        for chunk_start in range(start, start + block_size, hbs):
            chunk = tuple(tokens[chunk_start : chunk_start + hbs])
            chain = model.chunk_hash(chain, chunk, block_extra)
        rebuilt = model.external(chain)
        if rebuilt != block_hash:
            return index, block_hash, rebuilt
        chain_values[block_hash] = chain
    return None
