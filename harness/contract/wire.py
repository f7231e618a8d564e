"""vLLM's KV events as they are on the wire, decoded without importing vLLM.

The structs follow vllm/distributed/kv_events.py of vLLM 0.33.0 and 0.34.0
(the same file), field for field. Events are tagged structs encoded as msgpack
maps (tag key "type", value the class name) with defaulted fields omitted; the
batch is an array [ts, events, data_parallel_rank?]. Decoding ignores map keys
and trailing batch elements that a later release may add.
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
    chunk being framed and the payload it ends are held, never the whole
    input. Raises UnreadableStream naming the offset of the payload that is
    not msgpack, nested too deeply, too large, or cut short.
    """
    for held, start, ends in _frames(data):
        base = start
        for end in ends:
            yield start, bytes(held[start - base : end - base])
            start = end


def decode_batches(
    data: bytes | memoryview | BinaryIO,
) -> Iterator[tuple[int, KVEventBatch]]:
    """Yield ``(offset, batch)`` for each KVEventBatch payload in ``data``."""
    decode = _batch_decoder.decode
    for held, start, ends in _frames(data):
        base = start
        for end in ends:
            try:
                batch = decode(held[start - base : end - base])
            except (msgspec.DecodeError, RecursionError) as exc:
                raise _not_a_batch(f"byte {start}", exc) from None
            yield start, batch
            start = end


def _frames(data: bytes | memoryview | BinaryIO) -> Iterator[tuple]:
    """Per chunk read, the payloads it ends: ``(held, start, ends)``, the
    payloads lying from offset ``start`` to the first of ``ends``, from
    there to the next, and so on; ``held`` a memoryview of the input from
    ``start`` on.

    Framing uses msgpack-python's streaming ``Unpacker`` (``feed``, ``skip``,
    ``tell``), which finds where each object ends without building it;
    msgspec has no streaming decoder. A chunk's payloads come at once, as
    offsets (no object for the garbage collector to track), so that the
    caller pays for a generator step per chunk, not per payload; the
    payloads before a bad one come before its error.
    """
    stream = io.BytesIO(data) if isinstance(data, bytes | memoryview) else data
    unpacker = msgpack.Unpacker(max_buffer_size=MAX_PAYLOAD_BYTES + READ_CHUNK_BYTES)
    skip, tell = unpacker.skip, unpacker.tell
    parts = []  # the input from offset `start` on, as read: one payload's start
    start = read = 0
    while chunk := stream.read(READ_CHUNK_BYTES):
        unpacker.feed(chunk)
        parts.append(chunk)
        read += len(chunk)
        first, ends = start, []
        try:
            while True:
                skip()
                end = tell()
                if end - start > MAX_PAYLOAD_BYTES:
                    break
                ends.append(end)
                start = end
        except msgpack.OutOfData:
            pass
        except (msgpack.StackError, msgpack.FormatError, ValueError) as exc:
            if ends:
                yield memoryview(b"".join(parts)), first, ends
            raise _not_msgpack(f"byte {start}", exc) from None
        if ends:  # the held input joined once per chunk, its rest kept
            held = memoryview(b"".join(parts))
            parts = [held[start - first :]]
            yield held, first, ends
        if read - start > MAX_PAYLOAD_BYTES:
            raise UnreadableStream(
                f"byte {start}",
                f"a payload of over {MAX_PAYLOAD_BYTES} bytes: not a KVEventBatch",
            )
    if read > start:
        raise UnreadableStream(
            f"byte {start}",
            f"truncated: the input ends {read - start} byte(s) into this payload",
        )


def _not_msgpack(position: str, exc: Exception) -> UnreadableStream:
    if isinstance(exc, msgpack.StackError):
        return UnreadableStream(position, "msgpack nested deeper than any KVEventBatch")
    reason = str(exc) or "a byte that starts no msgpack object"
    return UnreadableStream(position, f"not msgpack: {reason}")


def decode_event(payload: bytes) -> KVCacheEvent:
    """Decode one event encoded on its own (as vLLM's encoder writes it)."""
    return _event_decoder.decode(payload)


def decode_batch(payload: bytes, position: str) -> KVEventBatch:
    """One KVEventBatch payload; ``position`` names it if it is not one."""
    try:
        return _batch_decoder.decode(payload)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise _not_a_batch(position, exc) from None


def _not_a_batch(position: str, exc: Exception) -> UnreadableStream:
    """A payload msgspec refused (ValidationError included), or nested inside
    a field that takes any value deeper than Python can decode."""
    if isinstance(exc, RecursionError):
        return UnreadableStream(
            position, "not a KVEventBatch: nested deeper than Python can decode"
        )
    return UnreadableStream(position, f"not a KVEventBatch: {exc}")


def short_hash(block_hash: ExternalBlockHash | None) -> str:
    if block_hash is None:
        return "None"
    if isinstance(block_hash, int):
        return f"{block_hash & 0xFFFFFFFFFFFFFFFF:016x}"[:8]
    return block_hash.hex()[:8]
