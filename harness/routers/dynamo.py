"""NVIDIA Dynamo's radix tree as a consumer of vLLM's KV events.

The adapter turns harness.contract.wire's structs into the JSON events that
``dynamo._core.RadixTree.apply_event`` reads (ai-dynamo-runtime 1.6.1):

- ``BlockStored`` -> ``{"stored": {"parent_hash": P, "blocks": [{"block_hash":
  H, "tokens_hash": T}, ...]}}``, one block per reported hash;
- ``BlockRemoved`` -> ``{"removed": {"block_hashes": [H, ...]}}``;
- ``AllBlocksCleared`` -> ``"cleared"``, sent to every worker the adapter
  has used, since vLLM clears every view.

Hashes become 64-bit integers the way vLLM's ``maybe_convert_block_hash``
makes them (bytes: big-endian, low 64 bits kept; integers as they are).
``tokens_hash`` is Dynamo's own hash of the block's token ids
(``compute_block_hash_for_seq`` over exactly that block), which is what the
tree keys a node's children by. ``event_id`` increases by one per applied
event.

The engine is one worker. Dynamo's tree has no notion of vLLM's views
``(medium, group_idx)``, and groups of one engine report the same hashes, so
each view gets its own worker id: without that, a removal in one group would
drop the other group's copy. A store whose parent the tree does not hold
raises "Failed to find parent block" and is dropped whole; a removal of a
hash it does not hold raises "Failed to find block". The tree does not count
copies (a second store of a live hash is accepted, one removal drops it) and
removing a node drops its subtree. A store whose tokens do not span its
hashes (rule C3) gives no block its tokens, so the adapter does not send it
and counts it as rejected.

`DynamoAdapter.matched_tokens` asks the tree what it would predict for a
request (``find_matches``, the router's overlap query). The tree keys each
node by its own block's tokens, and a view's nodes come in two sizes (full
cache blocks, and hash blocks for partial entries and their ancestry), so a
request is queried as the stream stores it: its full blocks, then the hash
blocks inside the first block past them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from harness.contract.wire import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    ExternalBlockHash,
    KVCacheEvent,
)
from harness.errors import require

MASK_64 = (1 << 64) - 1


def dynamo_hash(block_hash: ExternalBlockHash) -> int:
    """A vLLM event hash as the 64-bit integer Dynamo keys blocks by."""
    if isinstance(block_hash, bytes):
        return int.from_bytes(block_hash, "big") & MASK_64
    return block_hash


def dynamo_core() -> Any:
    """ai-dynamo-runtime's core module (the consumers extra). Its tree logs
    a warning per rejected event unless told otherwise before the first
    import; the replays count rejections instead, so it logs errors only."""
    os.environ.setdefault("DYN_LOG", "error")
    return require("dynamo._core", "consumers")


def tokens_hash(token_ids: list[int]) -> int:
    """Dynamo's hash of one block's token ids."""
    core = dynamo_core()
    (value,) = core.compute_block_hash_for_seq(token_ids, len(token_ids))
    return value


class Unplaceable(ValueError):
    """A store whose tokens do not span its hashes (rule C3)."""


def spans_its_blocks(event: BlockStored) -> bool:
    return len(event.block_hashes) * event.block_size == len(event.token_ids)


def dynamo_data(event: BlockStored | BlockRemoved) -> dict[str, Any]:
    """The ``data`` member of Dynamo's event for a store or a removal."""
    if isinstance(event, BlockRemoved):
        return {
            "removed": {"block_hashes": [dynamo_hash(h) for h in event.block_hashes]}
        }
    size = event.block_size
    if not spans_its_blocks(event):
        raise Unplaceable(
            f"store of {len(event.block_hashes)} hashes x block_size {size} carries "
            f"{len(event.token_ids)} tokens (rule C3): no tokens to hash per block"
        )
    parent = event.parent_block_hash
    return {
        "stored": {
            "parent_hash": None if parent is None else dynamo_hash(parent),
            "blocks": [
                {
                    "block_hash": dynamo_hash(block_hash),
                    "tokens_hash": tokens_hash(
                        event.token_ids[index * size : (index + 1) * size]
                    ),
                }
                for index, block_hash in enumerate(event.block_hashes)
            ],
        }
    }


@dataclass
class DynamoAdapter:
    """Applies vLLM events to a Dynamo RadixTree, one worker id per view."""

    tree: Any
    workers: dict[tuple[str | None, int | None], int] = field(default_factory=dict)
    next_event_id: int = 0

    def apply(self, event: KVCacheEvent) -> list[str]:
        """Apply one event; return the tree's rejection messages (none if it
        took the event)."""
        if isinstance(event, AllBlocksCleared):
            return [
                message
                for worker in self.workers.values()
                if (message := self._send(worker, "cleared")) is not None
            ]
        view = (event.medium, event.group_idx)
        worker = self.workers.setdefault(view, len(self.workers))
        try:
            data = dynamo_data(event)
        except Unplaceable as exc:  # a relay cannot build the event: not sent
            return [f"not sent: {exc}"]
        message = self._send(worker, data)
        return [] if message is None else [message]

    def matched_tokens(
        self,
        view: tuple[str | None, int | None],
        token_ids: list[int],
        block_size: int,
        hash_block_size: int,
        max_length: int,
    ) -> int:
        """Tokens of ``token_ids`` (at most ``max_length``) that the tree
        holds for ``view`` as one path from the root: the full blocks it
        matches, then the hash blocks inside the next block."""
        worker = self.workers.get(view)
        if worker is None:
            return 0
        blocks = [
            tokens_hash(token_ids[start : start + block_size])
            for start in range(0, max_length - block_size + 1, block_size)
        ]
        full = self._depth(worker, blocks)
        start = full * block_size
        # Hash blocks strictly inside the next block (its last one would
        # complete the full block, which the tree does not hold).
        end = min(start + block_size - hash_block_size, max_length)
        inner = [
            tokens_hash(token_ids[begin : begin + hash_block_size])
            for begin in range(start, end - hash_block_size + 1, hash_block_size)
        ]
        if not inner:
            return start
        return start + (self._depth(worker, blocks[:full] + inner) - full) * (
            hash_block_size
        )

    def _depth(self, worker: int, sequence: list[int]) -> int:
        if not sequence:
            return 0
        return self.tree.find_matches(sequence).scores.get((worker, 0), 0)

    def _send(self, worker: int, data: dict[str, Any] | str) -> str | None:
        payload = {"event_id": self.next_event_id, "data": data, "dp_rank": 0}
        self.next_event_id += 1
        try:
            self.tree.apply_event(worker, json.dumps(payload).encode())
        except RuntimeError as exc:  # ValueError (undecodable) is our bug
            return str(exc)
        return None


def blocks_in(tree: Any) -> int:
    """Blocks the tree holds, over all workers."""
    return sum(
        len(json.loads(dumped)["event"]["data"]["stored"]["blocks"])
        for dumped in tree.dump_tree_as_events()
    )
