"""What adding fields to `BlockStored` does to the bytes on the wire, measured
on a tree's own vllm/distributed/kv_events.py.

msgspec writes a tagged struct as a msgpack map whose header it sizes from
the fields the struct declares, not from those it writes: with the tag, up
to 15 entries fit the one-byte fixmap header, more take the three-byte map16
header. So whether two more optional fields, left unset, change any byte of
a store depends on how many fields the release's `BlockStored` already
declares (14 in vLLM 0.32, 15 in 0.33). The pull-request body states what
this measures, never a fixed claim.

The measurement runs in a child process (`python -m
harness.submission.wire_header FILE`) that needs only msgspec: it takes the
event classes out of the file (`KVCacheEvent` and `BlockStored`, with every
base the file defines), defines them as the file does, encodes a minimal
store with msgspec's msgpack encoder, then the same store from a subclass
with two more optional fields (the ones upstream proposes), and prints both
encodings as JSON.
"""

import ast
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from harness import processes
from harness.errors import ExportError
from harness.trees.env import tree_env

KV_EVENTS = Path("vllm/distributed/kv_events.py")
EVENT_CLASS = "BlockStored"
# The optional fields upstream's skipped-context proposal adds (vLLM #44488).
EXTRA_FIELDS = ("skipped_parent_block_hash", "skipped_token_ids")
# A minimal store: one hash block of 16 tokens, no parent, no LoRA.
MINIMAL = {
    "block_hashes": [1],
    "parent_block_hash": None,
    "token_ids": list(range(16)),
    "block_size": 16,
    "lora_id": None,
    "medium": "GPU",
    "lora_name": None,
}
EXTENDED = f"""
class {EVENT_CLASS}({EVENT_CLASS}, tag="{EVENT_CLASS}"):
    {EXTRA_FIELDS[0]}: int | bytes | None = None
    {EXTRA_FIELDS[1]}: list[int] | None = None
"""


@dataclass(frozen=True)
class WireFacts:
    """A minimal BlockStored on one tree, as encoded, and with two more
    optional fields left unset."""

    release: str
    fields: int  # fields BlockStored declares
    encoded: str  # hex of the minimal store's bytes
    extended: str  # hex of the same store with the two fields added

    @property
    def size(self) -> int:
        return len(self.encoded) // 2

    @property
    def extended_size(self) -> int:
        return len(self.extended) // 2

    @property
    def unchanged(self) -> bool:
        return self.encoded == self.extended

    @staticmethod
    def header(encoded: str) -> str:
        """The msgpack map header that starts ``encoded``, as spaced hex."""
        first = int(encoded[:2], 16)
        length = {0xDE: 3, 0xDF: 5}.get(first, 1)
        return " ".join(encoded[i : i + 2] for i in range(0, 2 * length, 2))

    @staticmethod
    def header_kind(encoded: str) -> str:
        first = int(encoded[:2], 16)
        if 0x80 <= first <= 0x8F:
            return f"fixmap of {first - 0x80} entries"
        width = {0xDE: "map16", 0xDF: "map32"}.get(first, f"0x{first:02x}")
        return f"{width} of {int(encoded[2:6], 16)} entries"


def measure(tree: Path, release: str) -> WireFacts | None:
    """The wire facts of the tree's BlockStored, or None for a tree without
    vllm/distributed/kv_events.py (a test's tiny tree)."""
    source = tree / KV_EVENTS
    if not source.is_file():
        return None
    result = processes.run(
        [sys.executable, "-m", __name__, str(source)],
        env=tree_env(None, PYTHONDONTWRITEBYTECODE="1"),
    )
    if result.returncode != 0:
        raise ExportError(
            f"cannot measure {EVENT_CLASS}'s encoding in {source}: "
            f"{processes.last_words(result)}"
        )
    found = json.loads(result.stdout)
    return WireFacts(release, found["fields"], found["encoded"], found["extended"])


def event_classes(source: str) -> str:
    """The source of BlockStored and every base class the module defines,
    bases first."""
    defined = {
        node.name: node
        for node in ast.parse(source).body
        if isinstance(node, ast.ClassDef)
    }
    if EVENT_CLASS not in defined:
        raise ValueError(f"no class {EVENT_CLASS}")
    chain, name = [], EVENT_CLASS
    while name in defined:
        node = defined[name]
        chain.append(ast.get_source_segment(source, node))
        bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
        name = next((b for b in bases if b in defined), None)
    return "\n\n".join(reversed(chain))


def encode(source: str) -> dict:
    """In the child: the minimal store's bytes under the file's classes,
    and with the extra fields."""
    from typing import Any

    import msgspec

    namespace = {"msgspec": msgspec, "Any": Any, "ExternalBlockHash": bytes | int}
    exec(event_classes(source), namespace)  # the release's own definitions
    declared = namespace[EVENT_CLASS]
    exec(EXTENDED, namespace)
    extended = namespace[EVENT_CLASS]
    required = declared.__struct_fields__[
        : len(declared.__struct_fields__) - len(declared.__struct_defaults__)
    ]
    values = {name: MINIMAL.get(name) for name in required}
    encoder = msgspec.msgpack.Encoder()
    return {
        "fields": len(declared.__struct_fields__),
        "encoded": encoder.encode(declared(**values)).hex(),
        "extended": encoder.encode(extended(**values)).hex(),
    }


if __name__ == "__main__":
    print(json.dumps(encode(Path(sys.argv[1]).read_text(encoding="utf-8"))))
