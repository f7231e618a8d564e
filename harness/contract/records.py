"""Workload records: what a run inside a vLLM tree writes, for the checks.

A record file holds msgpack records back to back: a `RunStart`, then per
operation an `OpRecord` with each event as vLLM's own encoder wrote it (what
its ZMQ publisher sends), a `PoolSnapshot` of the hashes the pool holds and a
`BookkeepingSample` of the series' ancestry bookkeeping; then an operation
that evicts everything and a `RunEnd`. A run asked for probes also writes a
`ProbeSetup` after the `RunStart` and a `ProbeRecord` after each operation's
snapshot: requests looked up in the engine's own cache at that quiet point,
for the router-fidelity measure (harness.routers.fidelity). An engine
session (harness.engine.engine) writes a `ServedRequest` per request to a
record file of its own. Imports no vLLM, so checkers can read the records.

Records are tagged structs: a new kind of record (a probe's result, say) is a
new struct with a tag of its own, added to `Record`; readers that do not
know a field ignore it.
"""

from pathlib import Path

import msgspec

from harness.contract.wire import ExternalBlockHash, split_payloads


class EventRecord(msgspec.Struct, array_like=True, frozen=True):
    label: str  # what produced it (harness.workloads.labeller)
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
    # The driven code registers partial prefix-cache entries: a pool driver
    # always (it calls cache_partial_block itself), a KVCacheManager only
    # where the tree's managers do (vLLM 0.26 on; harness.workloads.compat).
    partial_entries: bool = True
    # What the driven requests' prefix-cache hits are announced in:
    # "incremental" (never again) or "full" (again, on every hit), as the
    # tree honours it (harness.workloads.drivers, FULL_REPORT_CONFIGS).
    report_mode: str = "incremental"


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
    # tree that has none (harness.workloads.workloads.BOOKKEEPING_ATTRIBUTES).
    sizes: dict[str, int] | None


class RunEnd(msgspec.Struct, tag="end"):
    drained: bool  # everything was evicted by the last operation


class ProbeSetup(msgspec.Struct, tag="probe-setup"):
    """How the engine looks a request up, beyond RunStart's layout."""

    probes_per_op: int
    seed: int  # of the probes' own generator, never the workload's
    # The coordinator's cache-hit alignment in tokens (hash_block_size when
    # partial hash hits are on, else the scheduler block size; for a pool
    # driven alone, its manager's: hash_block_size from vLLM 0.26, whole
    # blocks before).
    alignment: int
    sliding_windows: list[int | None]  # per KV cache group, tokens


class Probe(msgspec.Struct, array_like=True, frozen=True):
    """One request looked up, never scheduled: its tokens, its hashes at each
    hash-block boundary (as events carry them) and the hit the engine's own
    lookup gives, capped at num_tokens - 1."""

    origin: str  # "prompt", "truncation" or "continuation" of an issued prompt
    token_ids: list[int]
    block_hashes: list[ExternalBlockHash]
    hit: int  # every group together (the coordinator's)
    hit_per_group: list[int]  # each group alone


class ProbeRecord(msgspec.Struct, tag="probes"):
    op: int  # the quiet point: after this operation
    probes: list[Probe]


class ServedRequest(msgspec.Struct, tag="served", frozen=True):
    """One request of a real engine's session, as the engine served it."""

    phase: str
    token_ids: list[int]
    block_hashes: list[ExternalBlockHash]  # at each hash-block boundary
    sent: float  # time.time() just before it was sent: the batches' clock
    num_cached_tokens: int  # the engine's prefix-cache hit for it


Record = (
    RunStart
    | OpRecord
    | PoolSnapshot
    | BookkeepingSample
    | RunEnd
    | ProbeSetup
    | ProbeRecord
    | ServedRequest
)
_record_encoder = msgspec.msgpack.Encoder()
_record_decoder = msgspec.msgpack.Decoder(Record)


def encode_record(record: Record) -> bytes:
    return _record_encoder.encode(record)


def read_records(path: Path) -> list[Record]:
    data = path.read_bytes()
    return [_record_decoder.decode(payload) for _, payload in split_payloads(data)]
