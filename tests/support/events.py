"""KV events built by hand, as vLLM's publisher would send them."""

import msgspec

from harness.contract.records import EventRecord, RunStart
from harness.contract.wire import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KVEventBatch,
)

GPU = "GPU"
_encoder = msgspec.msgpack.Encoder()


def stored(hashes, parent, block_size=2, group=0, medium=GPU, tokens=None, kind=None):
    """A store of ``hashes`` under ``parent``; by default its tokens span
    the hashes exactly (0, 1, 2, ... for ``block_size`` per hash). ``kind``
    is the group's kv_cache_spec_kind."""
    return BlockStored(
        block_hashes=list(hashes),
        parent_block_hash=parent,
        token_ids=list(range(len(hashes) * block_size)) if tokens is None else tokens,
        block_size=block_size,
        lora_id=None,
        medium=medium,
        lora_name=None,
        group_idx=group,
        kv_cache_spec_kind=kind,
    )


def removed(hashes, group=0, medium=GPU):
    return BlockRemoved(block_hashes=list(hashes), medium=medium, group_idx=group)


def cleared():
    return AllBlocksCleared()


def payload(*events, ts=0.0) -> bytes:
    """One KVEventBatch payload, as the publisher's third frame carries it."""
    return _encoder.encode(KVEventBatch(ts=ts, events=list(events)))


def payloads(*event_lists) -> bytes:
    """A capture file: one payload per event list, back to back."""
    return b"".join(
        payload(*events, ts=float(index)) for index, events in enumerate(event_lists)
    )


def labelled(label, event) -> EventRecord:
    """An event as a workload record holds it, with the label of its cause."""
    return EventRecord(label, _encoder.encode(event))


def run_start(**changes) -> RunStart:
    """A workload's first record, for a pool-2x6 run unless ``changes`` say
    otherwise."""
    fields = {
        "config": "pool-2x6",
        "seed": 0,
        "ops": 1,
        "hash_block_size": 2,
        "num_blocks": 24,
        "block_sizes": [6],
        "group_kinds": ["full_attention"],
        "medium": "GPU",
        "none_hash": b"\x00" * 32,
        "int_block_hashes": True,
        "tree": "/trees/vllm",
    }
    return RunStart(**(fields | changes))
