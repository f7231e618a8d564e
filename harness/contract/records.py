"""Workload records: what a run inside a vLLM tree writes, for the checks.

A record file holds msgpack records back to back: a `RunStart`, then per
operation an `OpRecord` with each event as vLLM's own encoder wrote it (what
its ZMQ publisher sends), a `PoolSnapshot` of the hashes the pool holds and a
`BookkeepingSample` of the series' ancestry bookkeeping; then an operation
that evicts everything and a `RunEnd`. Imports no vLLM, so checkers can read
the records.

Records are tagged structs: a new kind of record (a probe's result, say) is a
new struct with a tag of its own, added to `Record`; readers that do not
know a field ignore it.
"""

from pathlib import Path

import msgspec

from harness.contract.wire import ExternalBlockHash, split_payloads


class EventRecord(msgspec.Struct, array_like=True, frozen=True):
    label: str  # what produced it (harness.runs.labeller)
    data: bytes  # the event as vLLM's msgspec encoder wrote it


class RunStart(msgspec.Struct, tag="start"):
    config: str
    seed: int
    ops: int
    hash_block_size: int
    num_blocks: int  # in the pool
    block_sizes: list[int]  # per KV cache group
    group_kinds: list[str]  # per KV cache group, KVCacheSpecKind values
    medium: str
    none_hash: bytes  # vLLM's NONE_HASH for this run, for C4
    int_block_hashes: bool  # events carry 64-bit ints instead of bytes
    tree: str  # where vllm was imported from


class OpRecord(msgspec.Struct, tag="op"):
    index: int
    name: str
    events: list[EventRecord]


class PoolSnapshot(msgspec.Struct, tag="snapshot"):
    op: int
    held: dict[int, list[ExternalBlockHash]]  # group -> hashes the pool holds


class BookkeepingSample(msgspec.Struct, tag="bookkeeping"):
    op: int
    # Size of each ancestry-bookkeeping structure of the pool, None on a
    # tree that has none (harness.runs.workloads.BOOKKEEPING_ATTRIBUTES).
    sizes: dict[str, int] | None


class RunEnd(msgspec.Struct, tag="end"):
    drained: bool  # everything was evicted by the last operation


Record = RunStart | OpRecord | PoolSnapshot | BookkeepingSample | RunEnd
_record_encoder = msgspec.msgpack.Encoder()
_record_decoder = msgspec.msgpack.Decoder(Record)


def encode_record(record: Record) -> bytes:
    return _record_encoder.encode(record)


def read_records(path: Path) -> list[Record]:
    data = path.read_bytes()
    return [_record_decoder.decode(payload) for _, payload in split_payloads(data)]
