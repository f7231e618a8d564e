"""vLLM's KV events as they are on the wire, decoded without importing vLLM.

The structs follow vllm/distributed/kv_events.py of vLLM 0.33.0, field for
field. Events are tagged structs encoded as msgpack maps (tag key "type",
value the class name) with defaulted fields omitted; the batch is an array
[ts, events, data_parallel_rank?]. Decoding ignores map keys and trailing
batch elements that a later release may add.
"""

import io
from collections.abc import Iterator
from typing import Any, BinaryIO

import msgpack
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


_batch_decoder = msgspec.msgpack.Decoder(KVEventBatch)
_event_decoder = msgspec.msgpack.Decoder(KVCacheEvent)

# A payload larger than this is not one of vLLM's batches (they are kilobytes):
# the input is refused rather than held in memory.
MAX_PAYLOAD_BYTES = 64 << 20
READ_CHUNK_BYTES = 1 << 20


def split_payloads(data: bytes | memoryview | BinaryIO) -> Iterator[tuple[int, bytes]]:
    """Yield ``(offset, payload)`` for msgpack objects laid back to back.

    ``data`` is bytes or a binary stream, read a chunk at a time: only the
    payload being framed is held, never the whole input. Framing uses
    msgpack-python's streaming ``Unpacker`` (``feed``, ``skip``, ``tell``),
    which finds where each object ends without building it; msgspec has no
    streaming decoder. Raises UnreadableStream naming the offset of the
    payload that is not msgpack, nested too deeply, too large, or cut short.
    """
    stream = io.BytesIO(data) if isinstance(data, bytes | memoryview) else data
    unpacker = msgpack.Unpacker(max_buffer_size=MAX_PAYLOAD_BYTES + READ_CHUNK_BYTES)
    pending = bytearray()  # the input from offset `start` on: one payload's start
    start = 0
    while chunk := stream.read(READ_CHUNK_BYTES):
        unpacker.feed(chunk)
        pending += chunk
        while True:
            try:
                unpacker.skip()
            except msgpack.OutOfData:
                break
            except msgpack.StackError:
                raise UnreadableStream(
                    f"byte {start}", "msgpack nested deeper than any KVEventBatch"
                ) from None
            except (msgpack.FormatError, ValueError) as exc:
                reason = str(exc) or "a byte that starts no msgpack object"
                raise UnreadableStream(
                    f"byte {start}", f"not msgpack: {reason}"
                ) from None
            end = unpacker.tell()
            if end - start > MAX_PAYLOAD_BYTES:
                break
            yield start, bytes(pending[: end - start])
            del pending[: end - start]
            start = end
        if len(pending) > MAX_PAYLOAD_BYTES:
            raise UnreadableStream(
                f"byte {start}",
                f"a payload of over {MAX_PAYLOAD_BYTES} bytes: not a KVEventBatch",
            )
    if pending:
        raise UnreadableStream(
            f"byte {start}",
            f"truncated: the input ends {len(pending)} byte(s) into this payload",
        )


def decode_batches(
    data: bytes | memoryview | BinaryIO,
) -> Iterator[tuple[int, KVEventBatch]]:
    """Yield ``(offset, batch)`` for each KVEventBatch payload in ``data``."""
    for offset, payload in split_payloads(data):
        yield offset, decode_batch(payload, f"byte {offset}")


def decode_event(payload: bytes) -> KVCacheEvent:
    """Decode one event encoded on its own (as vLLM's encoder writes it)."""
    return _event_decoder.decode(payload)


def decode_batch(payload: bytes, position: str) -> KVEventBatch:
    """One KVEventBatch payload; ``position`` names it if it is not one."""
    try:
        return _batch_decoder.decode(payload)
    except msgspec.DecodeError as exc:  # ValidationError included
        raise UnreadableStream(position, f"not a KVEventBatch: {exc}") from None
    except RecursionError:  # nesting inside a field that takes any value
        raise UnreadableStream(
            position, "not a KVEventBatch: nested deeper than Python can decode"
        ) from None


def short_hash(block_hash: ExternalBlockHash | None) -> str:
    if block_hash is None:
        return "None"
    if isinstance(block_hash, int):
        return f"{block_hash & 0xFFFFFFFFFFFFFFFF:016x}"[:8]
    return block_hash.hex()[:8]
