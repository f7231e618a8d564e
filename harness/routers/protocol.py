"""The router protocol's messages (docs/router-protocol.md), both sides.

A router in any language is scored by `python -m harness score` as a child
process that reads JSON lines on stdin and answers on stdout: the harness's
`Greeting` once (``hello``, answered ``ready``), an `ask_message` before
each request of the workload (answered with the predicted hit and the
sequence number the router has applied), and ``bye`` (answered with the
router's own counts). The harness's side of the pipes is
harness.routers.router_child; the built-in routers' side, harness.engine.shims.

Every reply is checked here, and a reply that breaks the protocol is a
`Problem` of one of `PROBLEMS`; the child's side turns it into
harness.errors.RouterProtocolError, naming the router. Nothing here starts
a process or reads a pipe.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass

from harness.contract.wire import ExternalBlockHash
from harness.routers.router import EngineLayout, GroupLayout

VERSION = 1
# The longest line a router may write, newline excluded.
MAX_LINE_BYTES = 65536
# How long a router has to answer each message, in seconds.
READY_S = 120.0
ANSWER_S = 60.0
BYE_S = 30.0
# How a reply can break the protocol (the doc's table).
MALFORMED, OVERSIZED, LATE, BEHIND, EXITED = (
    "malformed",
    "oversized",
    "late",
    "behind",
    "exited",
)
PROBLEMS = (MALFORMED, OVERSIZED, LATE, BEHIND, EXITED)


class Problem(Exception):
    """A reply that breaks the protocol: ``kind`` one of PROBLEMS."""

    def __init__(self, kind: str, detail: str):
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


def hash_json(block_hash: ExternalBlockHash) -> str | int:
    """An engine hash as the protocol writes it: hex of bytes, an integer as
    it is."""
    return block_hash.hex() if isinstance(block_hash, bytes) else block_hash


@dataclass(frozen=True)
class Group:
    group_idx: int
    kind: str
    block_size: int


@dataclass(frozen=True)
class Greeting:
    """``hello``: where the engine publishes and how it keys prompts."""

    endpoint: str
    replay_endpoint: str | None
    topic: str
    block_size: int
    hash_block_size: int
    alignment: int
    hash_algorithm: str
    none_hash: str | int
    hash_seed: str | None
    groups: tuple[Group, ...]
    medium: str = "GPU"
    engine: str = ""

    def as_json(self) -> dict:
        return {
            "type": "hello",
            "protocol": VERSION,
            "events": {
                "endpoint": self.endpoint,
                "replay_endpoint": self.replay_endpoint,
                "topic": self.topic,
            },
            "block_size": self.block_size,
            "hash_block_size": self.hash_block_size,
            "alignment": self.alignment,
            "hash": {
                "algorithm": self.hash_algorithm,
                "none_hash": self.none_hash,
                "pythonhashseed": self.hash_seed,
            },
            "groups": [asdict(group) for group in self.groups],
            "medium": self.medium,
            "engine": self.engine,
        }

    @classmethod
    def from_json(cls, data: dict) -> Greeting:
        """A greeting the harness wrote (the built-in routers' side)."""
        events, hashing = data["events"], data["hash"]
        return cls(
            endpoint=events["endpoint"],
            replay_endpoint=events["replay_endpoint"],
            topic=events["topic"],
            block_size=data["block_size"],
            hash_block_size=data["hash_block_size"],
            alignment=data["alignment"],
            hash_algorithm=hashing["algorithm"],
            none_hash=hashing["none_hash"],
            hash_seed=hashing["pythonhashseed"],
            groups=tuple(Group(**group) for group in data["groups"]),
            medium=data.get("medium", "GPU"),
            engine=data.get("engine", ""),
        )

    def layout(self) -> EngineLayout:
        """The engine as harness.routers.router's lookup takes it."""
        ordered = sorted(self.groups, key=lambda group: group.group_idx)
        return EngineLayout(
            hash_block_size=self.hash_block_size,
            alignment=self.alignment,
            groups=tuple(GroupLayout(g.kind, g.block_size) for g in ordered),
            medium=self.medium,
        )


def ask_message(
    number: int,
    after_seq: int,
    token_ids: list[int],
    block_hashes: list[ExternalBlockHash],
) -> dict:
    return {
        "type": "ask",
        "id": number,
        "after_seq": after_seq,
        "token_ids": list(token_ids),
        "block_hashes": [hash_json(h) for h in block_hashes],
    }


def bye_message(after_seq: int) -> dict:
    return {"type": "bye", "after_seq": after_seq}


def line_of(message: dict) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def parsed(line: bytes, due: str) -> dict:
    """One line of the router's as a JSON object of type ``due``."""
    try:
        reply = json.loads(line)
    except (ValueError, RecursionError):
        raise Problem(MALFORMED, f"not JSON: {_quoted(line)}") from None
    if not isinstance(reply, dict):
        kind = type(reply).__name__
        raise Problem(MALFORMED, f"a JSON {kind}, not an object: {_quoted(line)}")
    if reply.get("type") != due:
        raise Problem(MALFORMED, f"type {reply.get('type')!r} where {due!r} was due")
    return reply


def _quoted(line: bytes) -> str:
    text = line[:80].decode("utf-8", "replace")
    return repr(text) + ("..." if len(line) > 80 else "")


def _integer(reply: dict, name: str, least: int | None = None) -> int:
    value = reply.get(name)
    if type(value) is not int:
        raise Problem(MALFORMED, f"{name} {value!r} is not an integer")
    if least is not None and value < least:
        raise Problem(MALFORMED, f"{name} {value} is less than {least}")
    return value


@dataclass(frozen=True)
class Ready:
    name: str | None
    block_size: int | None


def check_ready(reply: dict) -> Ready:
    if reply.get("protocol") != VERSION:
        raise Problem(
            MALFORMED,
            f"protocol {reply.get('protocol')!r}; the harness speaks {VERSION}",
        )
    name = reply.get("name")
    if name is not None and (not isinstance(name, str) or not 0 < len(name) <= 64):
        raise Problem(MALFORMED, f"name {name!r} is not a string of 1-64 characters")
    size = reply.get("block_size")
    if size is not None:
        size = _integer(reply, "block_size", 1)
    return Ready(name, size)


@dataclass(frozen=True)
class Answer:
    seen_seq: int
    hit_tokens: int


def check_answer(reply: dict, number: int, after_seq: int) -> Answer:
    if reply.get("id") != number or type(reply.get("id")) is not int:
        raise Problem(MALFORMED, f"id {reply.get('id')!r} answers ask {number}")
    seen = _integer(reply, "seen_seq", -1)
    hit = _integer(reply, "hit_tokens", 0)
    if seen < after_seq:
        raise Problem(
            BEHIND,
            f"ask {number}: seen_seq {seen}, but the engine had published up "
            f"to {after_seq}",
        )
    return Answer(seen, hit)


def check_bye(reply: dict) -> Counter:
    counts = reply.get("counts", {})
    if not isinstance(counts, dict) or not all(
        isinstance(name, str) and type(value) is int and value >= 0
        for name, value in counts.items()
    ):
        raise Problem(MALFORMED, "counts are not names to whole numbers")
    return Counter(counts)
