"""A hash-set router written against docs/router-protocol.md (pyzmq, msgpack)."""

import json
import sys
from collections import Counter, defaultdict
from itertools import takewhile

import msgpack
import zmq

hello = json.loads(sys.stdin.readline())
events = zmq.Context().socket(zmq.SUB)
events.setsockopt_string(zmq.SUBSCRIBE, hello["events"]["topic"])
events.connect(hello["events"]["endpoint"])
groups, held = {g["group_idx"]: g for g in hello["groups"]}, defaultdict(Counter)
unit, align, seen = hello["hash_block_size"], hello["alignment"], -1
print(json.dumps({"type": "ready", "protocol": 1, "name": "doc-hash-set"}), flush=True)
for ask in takewhile(lambda a: a["type"] != "bye", map(json.loads, sys.stdin)):
    while seen < ask["after_seq"]:
        _, seq, payload = events.recv_multipart()
        seen = int.from_bytes(seq, "big")
        for event in msgpack.unpackb(payload)[1]:  # group -> hash -> copies held
            copies, step = held[event.get("group_idx") or 0], event["type"]
            held = defaultdict(Counter) if step == "AllBlocksCleared" else held
            for h in event.get("block_hashes", []):
                h = h.hex() if isinstance(h, bytes) else h
                copies[h] = max(0, copies[h] + (1 if step == "BlockStored" else -1))
    hashes, hit = ask["block_hashes"], (len(ask["token_ids"]) - 1) // align * align
    has = lambda i, n, h=hashes, k=held: n and k[i][h[n // unit - 1]] > 0  # noqa: E731
    for i, g in groups.items():  # attention: whole blocks, then inside the next
        if (size := g["block_size"]) and g["kind"] == "full_attention":
            ends = ((b, (b + 1) * size) for b in range(hit // size + 1))
            blocks = next(b for b, end in ends if end > hit or not has(i, end))
            inside = range(min(hit, (blocks + 1) * size - unit), blocks * size, -unit)
            hit = next((n for n in inside if has(i, n)), blocks * size)
    others = [i for i, g in groups.items() if g["kind"] != "full_attention"]
    hit = next((n for n in range(hit, 0, -unit) if all(has(i, n) for i in others)), 0)
    answer = {"type": "answer", "id": ask["id"], "seen_seq": seen, "hit_tokens": hit}
    print(json.dumps(answer), flush=True)
print(json.dumps({"type": "bye"}), flush=True)
