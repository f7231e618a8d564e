"""Stream checker for vLLM's KV-cache event stream (the `check-stream` verb).

Decodes captured ``KVEventBatch`` payloads without importing vLLM, replays
them into one multiset view per ``(medium, group_idx)`` and reports every
breach of the stream contract (docs/stream-contract.md) that a stream alone
can show:

- C1 a stored block's parent is not live when the store is applied;
- C2 a removed hash is not live when the removal is applied;
- C3 ``len(block_hashes) * block_size != len(token_ids)``;
- C4 a reported hash is not the chain hash of the tokens leading to it
  (needs a `HashModel`);
- C5 hashes still live once the stream is known to have evicted everything
  (`StreamChecker.check_drained`);
- C6 the view disagrees with a snapshot of the pool (`StreamChecker.check_pool`).

Each violation names its rule, the batch and event it was found at and the
hashes that witness it, shortened; it is the smallest witness of that
anomaly, so one bad store gives one violation, not one per later event.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

# --------------------------------------------------------------------------
# Wire schema: vllm/distributed/kv_events.py of vLLM 0.33.0, field for field.
# Events are tagged structs encoded as msgpack maps (tag key "type", value the
# class name) with defaulted fields omitted; the batch is an array
# [ts, events, data_parallel_rank?]. Decoding ignores map keys and trailing
# batch elements that a later release may add.
# --------------------------------------------------------------------------

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


class UnreadableStream(Exception):
    """Input that is not a sequence of KVEventBatch payloads.

    ``position`` says where, e.g. "byte 1234" or "message 7".
    """

    def __init__(self, position: str, reason: str):
        super().__init__(f"{position}: {reason}")
        self.position = position
        self.reason = reason


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


# --------------------------------------------------------------------------
# Replay
# --------------------------------------------------------------------------


def short_hash(block_hash: ExternalBlockHash | None) -> str:
    if block_hash is None:
        return "None"
    if isinstance(block_hash, int):
        return f"{block_hash & 0xFFFFFFFFFFFFFFFF:016x}"[:8]
    return block_hash.hex()[:8]


@dataclass(frozen=True)
class Violation:
    """One breach of a rule, with the hashes that witness it.

    ``batch`` and ``event`` locate the event at fault (None for findings that
    belong to the end of the stream or to a pool snapshot).
    """

    rule: str
    batch: int | None
    event: int | None
    hashes: tuple[ExternalBlockHash | None, ...]
    detail: str

    def __str__(self) -> str:
        where = "end of stream" if self.batch is None else f"batch {self.batch}"
        if self.event is not None:
            where += f" event {self.event}"
        witness = " ".join(short_hash(h) for h in self.hashes)
        return f"{self.rule} at {where}: {self.detail} [{witness}]"


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


ViewKey = tuple[str | None, int | None]


def _index_of(events: list, event: object) -> int:
    return next(index for index, candidate in enumerate(events) if candidate is event)


@dataclass
class StreamChecker:
    """Replays events into multiset views and collects violations.

    Call `apply` once per batch, in stream order; `check_pool` and
    `check_drained` at the points where their rule applies.
    """

    hash_model: HashModel | None = None
    # Record each hash's parent, which `check_pool` (C6) walks and which
    # witnesses name; off by default, it costs a third of the replay time.
    track_ancestry: bool = False
    # Per view: live hash -> number of stores not yet matched by a removal.
    views: dict[ViewKey, dict[ExternalBlockHash, int]] = field(default_factory=dict)
    # Per view, when tracking ancestry: hash -> (parent, batch of the store
    # that last made it live). Kept after the hash dies: a hash names its
    # prefix, so its parent never changes, and the next store that makes it
    # live overwrites the batch.
    stored: dict[ViewKey, dict[ExternalBlockHash, tuple]] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    # Stores of a hash that was already live (class K5: the view counts them).
    duplicate_stores: int = 0
    batches: int = 0
    events: int = 0
    # C4: engine chain value of every external hash verified so far. A hash
    # names its whole prefix, so a verified value never goes stale.
    chain_values: dict[ExternalBlockHash, bytes] = field(default_factory=dict)

    def apply(self, events: list[KVCacheEvent]) -> None:
        """Apply one batch's events in list order."""
        batch = self.batches
        self.batches = batch + 1
        self.events += len(events)
        duplicates = 0
        check_chains = self.hash_model is not None
        medium = group = live = stored = None
        for event in events:
            kind = type(event)
            if kind is AllBlocksCleared:
                self.views.clear()
                live = None
                continue
            if live is None or event.group_idx != group or event.medium != medium:
                medium, group = event.medium, event.group_idx
                live, stored = self._view((medium, group))
            if kind is BlockStored:
                parent = event.parent_block_hash
                if parent is not None and parent not in live:
                    self._violation("C1", batch, events, event, "parent is not live")
                hashes = event.block_hashes
                if len(hashes) * event.block_size != len(event.token_ids):
                    self._violation(
                        "C3",
                        batch,
                        events,
                        event,
                        f"{len(hashes)} hashes x block_size {event.block_size} "
                        f"!= {len(event.token_ids)} tokens",
                    )
                elif check_chains:  # tokens cannot be placed when C3 fails
                    self._check_chain(batch, events, event)
                for block_hash in hashes:
                    count = live.get(block_hash)
                    if count is None:
                        live[block_hash] = 1
                        if stored is not None:
                            stored[block_hash] = (parent, batch)
                    else:
                        live[block_hash] = count + 1
                        duplicates += 1
                    parent = block_hash
            else:
                for block_hash in event.block_hashes:
                    count = live.get(block_hash)
                    if count is None:
                        self._violation(
                            "C2",
                            batch,
                            events,
                            event,
                            "removed hash is not live",
                            (block_hash,),
                        )
                    elif count == 1:
                        del live[block_hash]
                    else:
                        live[block_hash] = count - 1
        self.duplicate_stores += duplicates

    def _view(self, key: ViewKey) -> tuple[dict, dict | None]:
        live = self.views.get(key)
        if live is None:
            live = self.views[key] = {}
        if not self.track_ancestry:
            return live, None
        return live, self.stored.setdefault(key, {})

    def _violation(
        self,
        rule: str,
        batch: int,
        events: list,
        event: KVCacheEvent,
        detail: str,
        hashes: tuple | None = None,
    ) -> None:
        if hashes is None:
            hashes = (event.parent_block_hash, *event.block_hashes[:1])
        self.violations.append(
            Violation(rule, batch, _index_of(events, event), hashes, detail)
        )

    def _check_chain(self, batch: int, events: list, event: BlockStored) -> None:
        """C4: chain-hash the event's tokens from its parent's chain value.

        The parent's chain value was itself rebuilt from the tokens along its
        own parent chain, so this rebuilds the whole prefix. Stores whose
        parent's value is unknown (no verified store of it yet) are skipped.
        """
        model = self.hash_model
        hbs = model.hash_block_size
        block_size = event.block_size
        tokens = event.token_ids
        extra_keys = event.extra_keys or ()
        parent = event.parent_block_hash
        chain = None if parent is None else self.chain_values.get(parent)
        if (parent is not None and chain is None) or block_size % hbs:
            return
        for index, block_hash in enumerate(event.block_hashes):
            block_extra = extra_keys[index] if index < len(extra_keys) else None
            start = index * block_size
            for chunk_start in range(start, start + block_size, hbs):
                chunk = tuple(tokens[chunk_start : chunk_start + hbs])
                chain = model.chunk_hash(chain, chunk, block_extra)
            rebuilt = model.external(chain)
            if rebuilt != block_hash:
                self._violation(
                    "C4",
                    batch,
                    events,
                    event,
                    f"hash {index} is not the chain hash of its tokens "
                    "(reported, rebuilt)",
                    (block_hash, rebuilt),
                )
                return
            self.chain_values[block_hash] = chain

    def check_pool(self, held: Mapping[ViewKey, Iterable[ExternalBlockHash]]) -> None:
        """C6: compare the views with the hashes a pool holds at a quiet point.

        Every held hash must be live; every live hash the pool does not hold
        must be an ancestor (through live parents) of a held hash.
        """
        if not self.track_ancestry:
            raise ValueError("check_pool needs StreamChecker(track_ancestry=True)")
        batch = self.batches - 1
        for key in sorted(set(self.views) | set(held), key=repr):
            live = self.views.get(key, {})
            stored = self.stored.get(key, {})
            held_hashes = set(held.get(key, ()))
            reachable = set()
            for block_hash in held_hashes:
                if block_hash not in live:
                    self.violations.append(
                        Violation(
                            "C6",
                            batch,
                            None,
                            (block_hash,),
                            f"view {key}: pool holds a hash that is not live",
                        )
                    )
                    continue
                parent = stored[block_hash][0]
                while parent in live and parent not in reachable:
                    reachable.add(parent)
                    parent = stored[parent][0]
            for block_hash in live:
                if block_hash not in held_hashes and block_hash not in reachable:
                    self.violations.append(
                        Violation(
                            "C6",
                            batch,
                            None,
                            (block_hash,),
                            f"view {key}: live hash stored in batch "
                            f"{stored[block_hash][1]} is neither held by the pool "
                            "nor an ancestor of a held hash",
                        )
                    )

    def check_drained(self) -> None:
        """C5: the stream evicted everything, so every view must be empty."""
        for key, live in sorted(self.views.items(), key=lambda item: repr(item[0])):
            stored = self.stored.get(key, {})
            for block_hash, count in live.items():
                origin = (
                    f"; stored in batch {stored[block_hash][1]}"
                    if block_hash in stored
                    else ""
                )
                self.violations.append(
                    Violation(
                        "C5",
                        None,
                        None,
                        (block_hash,),
                        f"view {key}: still live x{count} after eviction "
                        f"of everything{origin}",
                    )
                )

    def live_count(self, key: ViewKey, block_hash: ExternalBlockHash) -> int:
        return self.views.get(key, {}).get(block_hash, 0)


# --------------------------------------------------------------------------
# The check-stream verb
# --------------------------------------------------------------------------

WITNESSES_PER_RULE = 5


def format_report(source: str, checker: StreamChecker) -> list[str]:
    by_rule: dict[str, list[Violation]] = {}
    for violation in checker.violations:
        by_rule.setdefault(violation.rule, []).append(violation)
    lines = [
        f"{source}: {checker.batches} batches, {checker.events} events, "
        f"{checker.duplicate_stores} stores of an already-live hash, "
        f"{len(checker.violations)} violations"
    ]
    for rule in sorted(by_rule):
        found = by_rule[rule]
        lines.append(f"  {rule}: {len(found)}")
        lines.extend(f"    {violation}" for violation in found[:WITNESSES_PER_RULE])
        if len(found) > WITNESSES_PER_RULE:
            lines.append(f"    ... {len(found) - WITNESSES_PER_RULE} more")
    return lines


def check_file(path: Path, expect_empty: bool) -> StreamChecker:
    checker = StreamChecker()
    for _, batch in decode_batches(path.read_bytes()):
        checker.apply(batch.events)
    if expect_empty:
        checker.check_drained()
    return checker


def check_zmq(args: argparse.Namespace) -> StreamChecker:
    import zmq

    from harness.capture import subscribe

    checker = StreamChecker()
    messages = subscribe(args.zmq, args.topic, args.max_events, args.timeout)
    try:
        for index, (payload, _) in enumerate(messages):
            try:
                batch = _batch_decoder.decode(payload)
            except msgspec.DecodeError as exc:
                raise UnreadableStream(
                    f"message {index}", f"not a KVEventBatch: {exc}"
                ) from None
            checker.apply(batch.events)
    except zmq.ZMQError as exc:
        raise UnreadableStream("subscription", str(exc)) from None
    if args.expect_empty:
        checker.check_drained()
    return checker


def run(args: argparse.Namespace) -> int:
    if not args.files and not args.zmq:
        print("check-stream: give FILE... or --zmq ENDPOINT", file=sys.stderr)
        return 2
    results: list[tuple[str, StreamChecker]] = []
    for name in args.files:
        try:
            results.append((name, check_file(Path(name), args.expect_empty)))
        except OSError as exc:
            print(f"{name}: unreadable: {exc.strerror}", file=sys.stderr)
            return 2
        except UnreadableStream as exc:
            print(f"{name}: unreadable at {exc}", file=sys.stderr)
            return 2
    if args.zmq:
        try:
            results.append((args.zmq, check_zmq(args)))
        except UnreadableStream as exc:
            print(f"{args.zmq}: unreadable at {exc}", file=sys.stderr)
            return 2
    for source, checker in results:
        print("\n".join(format_report(source, checker)))
    return 1 if any(checker.violations for _, checker in results) else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check-stream",
        help="check captured KV-event streams against the stream contract",
        description="Replay KVEventBatch payloads (files of payloads laid back "
        "to back, or a live ZMQ publisher) and report contract violations by "
        "rule. Exit 0 clean, 1 violations, 2 unreadable input.",
    )
    parser.add_argument("files", nargs="*", metavar="FILE")
    parser.add_argument(
        "--zmq", metavar="ENDPOINT", help="subscribe to a live publisher"
    )
    parser.add_argument("--topic", default="", help="ZMQ topic prefix (default: all)")
    parser.add_argument(
        "--max-events",
        type=int,
        default=None,
        help="stop the subscription after N events",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="stop the subscription after S seconds",
    )
    parser.add_argument(
        "--expect-empty",
        action="store_true",
        help="the stream ends with everything evicted: report live hashes (C5)",
    )
    parser.set_defaults(func=run)
