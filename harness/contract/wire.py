"""vLLM's KV events as they are on the wire, decoded without importing vLLM.

The structs follow vllm/distributed/kv_events.py of vLLM 0.33.0 and 0.34.0
(the same file), field for field. Events are tagged structs encoded as msgpack
maps (tag key "type", value the class name) with defaulted fields omitted; the
batch is an array [ts, events, data_parallel_rank?]. Decoding ignores map keys
and trailing batch elements that a later release may add.
"""

import io
import struct
from bisect import bisect_right
from collections.abc import Iterator
from itertools import chain
from operator import attrgetter, sub
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


class StoredHead(msgspec.Struct, tag="BlockStored", omit_defaults=True, gc=False):
    """A `BlockStored` as the stream checker reads it: every field decoded
    but ``token_ids``, kept as its msgpack bytes. The checker needs how many
    token ids a store carries (C3, `token_count`), never which, and decoding
    them is most of what reading a store costs; an element of the array is
    not checked to be an integer."""

    block_hashes: list[ExternalBlockHash]
    parent_block_hash: ExternalBlockHash | None
    token_ids: msgspec.Raw
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


class CheckedBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """A `KVEventBatch` whose stores are `StoredHead`."""

    ts: float
    events: list[StoredHead | BlockRemoved | AllBlocksCleared]
    data_parallel_rank: int | None = None


_batch_decoder = msgspec.msgpack.Decoder(KVEventBatch)
_checked_decoder = msgspec.msgpack.Decoder(CheckedBatch)
_checked_group_decoder = msgspec.msgpack.Decoder(list[CheckedBatch])
_events_of = attrgetter("events")
_event_decoder = msgspec.msgpack.Decoder(KVCacheEvent)
_head = struct.Struct(">B").unpack_from
_length16 = struct.Struct(">xH").unpack_from
_length32 = struct.Struct(">xI").unpack_from


def token_count(token_ids: list[int] | msgspec.Raw) -> int | None:
    """How many token ids a store carries: the list's length, or, for a
    `StoredHead`'s, the length its msgpack array header gives; None when
    they are not an array."""
    if token_ids.__class__ is list:
        return len(token_ids)
    head = _head(token_ids)[0]
    if 0x90 <= head <= 0x9F:  # fixarray
        return head - 0x90
    if head == 0xDC:
        return _length16(token_ids)[0]
    if head == 0xDD:
        return _length32(token_ids)[0]
    return None


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


def checked_events(
    data: bytes | memoryview | BinaryIO,
) -> Iterator[list[StoredHead | BlockRemoved | AllBlocksCleared]]:
    """The events of each KVEventBatch payload in ``data``, in order, as the
    stream checker reads them (`CheckedBatch`).

    Payloads are decoded a group of about `GROUP_BYTES` at a time, in one
    msgspec call over an array header put before them, so that a small
    batch costs one call per group, not one each; the group stays small,
    so no more than a few kilobytes of decoded events are held. A payload
    larger than that is decoded alone. The payloads before one that is not
    a KVEventBatch come before its error."""
    return chain.from_iterable(_checked_groups(data))


# About how many bytes of payloads `checked_events` decodes in one call.
GROUP_BYTES = 16 << 10


def _checked_groups(data) -> Iterator:
    decode_one, decode_group = _checked_decoder.decode, _checked_group_decoder.decode
    for held, start, ends in _frames(data):
        base = start
        first, count = 0, len(ends)
        while first < count:
            after = max(bisect_right(ends, start + GROUP_BYTES, first), first + 1)
            end = ends[after - 1]
            payloads = held[start - base : end - base]
            try:
                if after - first == 1:
                    yield (decode_one(payloads).events,)
                else:
                    header = b"\xdd" + (after - first).to_bytes(4, "big")
                    yield map(_events_of, decode_group(header + payloads))
            except (msgspec.DecodeError, RecursionError):
                yield _one_by_one(held, start - base, ends[first:after], base)
            start, first = end, after


def _one_by_one(held, offset: int, ends: list[int], base: int) -> Iterator:
    """A group that did not decode whole, a payload at a time: those before
    the bad one, then its error, naming its offset."""
    for end in ends:
        try:
            yield _checked_decoder.decode(held[offset : end - base]).events
        except (msgspec.DecodeError, RecursionError) as exc:
            raise _not_a_batch(f"byte {offset + base}", exc) from None
        offset = end - base


def _frames(data: bytes | memoryview | BinaryIO) -> Iterator[tuple]:
    """Per chunk read, the payloads it ends: ``(held, start, ends)``, the
    payloads lying from offset ``start`` to the first of ``ends``, from
    there to the next, and so on; ``held`` a memoryview of the input from
    ``start`` on.

    Framing uses msgpack-python's streaming ``Unpacker`` (``feed``, ``skip``,
    ``tell``), which finds where each object ends without building it;
    msgspec has no streaming decoder. A chunk's payloads come at once, as
    offsets (no object for the garbage collector to track), so that the
    caller pays for a generator step per chunk, not per payload, and the
    loop over them does nothing but ``skip`` and ``tell``; the payloads
    before a bad one come before its error.
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
        first, ends, failed = start, [], None
        append = ends.append
        try:
            while True:
                skip()
                append(tell())
        except msgpack.OutOfData:
            pass
        except (msgpack.StackError, msgpack.FormatError, ValueError) as exc:
            failed = exc
        # The bound, checked over the chunk's payloads at once.
        if ends and max(map(sub, ends, [first, *ends[:-1]])) > MAX_PAYLOAD_BYTES:
            del ends[_first_over_bound(first, ends) :]
            failed = None  # the payload over the bound is the first fault
        start = ends[-1] if ends else first
        if failed is not None:
            if ends:
                yield memoryview(b"".join(parts)), first, ends
            raise _not_msgpack(f"byte {start}", failed) from None
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


def _first_over_bound(first: int, ends: list[int]) -> int:
    """The number of the first payload over `MAX_PAYLOAD_BYTES` of those
    lying from ``first`` to each of ``ends``."""
    previous = first
    for number, end in enumerate(ends):
        if end - previous > MAX_PAYLOAD_BYTES:
            return number
        previous = end
    return len(ends)


def _not_msgpack(position: str, exc: Exception) -> UnreadableStream:
    if isinstance(exc, msgpack.StackError):
        return UnreadableStream(position, "msgpack nested deeper than any KVEventBatch")
    reason = str(exc) or "a byte that starts no msgpack object"
    return UnreadableStream(position, f"not msgpack: {reason}")


def decode_event(payload: bytes) -> KVCacheEvent:
    """Decode one event encoded on its own (as vLLM's encoder writes it)."""
    return _event_decoder.decode(payload)


def decode_batch(
    payload: bytes, position: str, tokens: bool = True
) -> KVEventBatch | CheckedBatch:
    """One KVEventBatch payload; ``position`` names it if it is not one.
    Without ``tokens``, as the stream checker reads it (`CheckedBatch`)."""
    try:
        return (_batch_decoder if tokens else _checked_decoder).decode(payload)
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
