"""vLLM's KV events as they are on the wire, decoded without importing vLLM.

The structs follow vllm/distributed/kv_events.py of vLLM 0.33.0, field for
field. Events are tagged structs encoded as msgpack maps (tag key "type",
value the class name) with defaulted fields omitted; the batch is an array
[ts, events, data_parallel_rank?]. Decoding ignores map keys and trailing
batch elements that a later release may add.
"""

from collections.abc import Iterator
from typing import Any

import msgspec

from harness.errors import UnreadableStream

ExternalBlockHash = bytes | int


class BlockStored(msgspec.Struct, tag=True, omit_defaults=True, gc=False):
    block_hashes: list[ExternalBlockHash]
    parent_block_hash: ExternalBlockHash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    ownership: str | None = None
    session_id: str | None = None
    lookahead_token_ids: list[list[int]] | None = None


class BlockRemoved(msgspec.Struct, tag=True, omit_defaults=True, gc=False):
    block_hashes: list[ExternalBlockHash]
    medium: str | None
    group_idx: int | None = None
    locality: str | None = None
    ownership: str | None = None


class AllBlocksCleared(msgspec.Struct, tag=True, omit_defaults=True, gc=False):
    pass


KVCacheEvent = BlockStored | BlockRemoved | AllBlocksCleared


class KVEventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[KVCacheEvent]
    data_parallel_rank: int | None = None


_raw_decoder = msgspec.msgpack.Decoder(msgspec.Raw)
_batch_decoder = msgspec.msgpack.Decoder(KVEventBatch)
_event_decoder = msgspec.msgpack.Decoder(KVCacheEvent)
_TRAILING = "trailing characters (byte "


def split_payloads(data: bytes | memoryview) -> Iterator[tuple[int, memoryview]]:
    """Yield ``(offset, payload)`` for msgpack objects laid back to back.

    msgspec decodes exactly one object per call and has no streaming decoder;
    its "trailing characters (byte N)" error marks where the first object
    ends, so skipping one raw object per call finds the frame boundaries at
    C speed without decoding anything.
    """
    view = memoryview(data)
    offset = 0
    while offset < len(view):
        rest = view[offset:]
        try:
            _raw_decoder.decode(rest)
            length = len(rest)
        except msgspec.DecodeError as exc:
            message = str(exc)
            position = message.find(_TRAILING)
            if position < 0:
                raise UnreadableStream(f"byte {offset}", message) from None
            length = int(
                message[position + len(_TRAILING) : message.index(")", position)]
            )
        yield offset, rest[:length]
        offset += length


def decode_batches(data: bytes | memoryview) -> Iterator[tuple[int, KVEventBatch]]:
    """Yield ``(offset, batch)`` for each KVEventBatch payload in ``data``."""
    for offset, payload in split_payloads(data):
        try:
            yield offset, _batch_decoder.decode(payload)
        except msgspec.DecodeError as exc:  # ValidationError included
            raise UnreadableStream(
                f"byte {offset}", f"not a KVEventBatch: {exc}"
            ) from None


def decode_event(payload: bytes) -> KVCacheEvent:
    """Decode one event encoded on its own (as vLLM's encoder writes it)."""
    return _event_decoder.decode(payload)


def decode_batch(payload: bytes, position: str) -> KVEventBatch:
    """One KVEventBatch payload; ``position`` names it if it is not one."""
    try:
        return _batch_decoder.decode(payload)
    except msgspec.DecodeError as exc:  # ValidationError included
        raise UnreadableStream(position, f"not a KVEventBatch: {exc}") from None


def short_hash(block_hash: ExternalBlockHash | None) -> str:
    if block_hash is None:
        return "None"
    if isinstance(block_hash, int):
        return f"{block_hash & 0xFFFFFFFFFFFFFFFF:016x}"[:8]
    return block_hash.hex()[:8]
