"""Print the K3 design comparison from runs of benchmarks/k3_designs.py.

The first run is the baseline (pristine). Needs only msgspec; with
ai-dynamo-runtime installed it also replays every stream into Dynamo's radix
tree and counts what it rejects. See benchmarks/k3_designs.py for the runs.

    python benchmarks/k3_compare.py /tmp/k3_pristine.json /tmp/k3_a.json /tmp/k3_b.json
"""

import argparse
import json
from collections import Counter

import msgspec


def dynamo_rejections(streams):
    """Stores and removals Dynamo's radix tree rejects, one tree per stream."""
    from dynamo._core import RadixTree

    def h64(block_hash):
        return int.from_bytes(block_hash, "big") & (2**64 - 1)

    rejected = Counter()
    for stream in streams:
        tree = RadixTree()
        for event_id, payload in enumerate(stream):
            event = msgspec.msgpack.decode(bytes.fromhex(payload))
            hashes = [h64(h) for h in event.get("block_hashes", [])]
            if event["type"] == "BlockStored":
                parent = event["parent_block_hash"]
                data = {
                    "stored": {
                        "parent_hash": None if parent is None else h64(parent),
                        "blocks": [{"block_hash": h, "tokens_hash": h} for h in hashes],
                    }
                }
            elif event["type"] == "BlockRemoved":
                data = {"removed": {"block_hashes": hashes}}
            else:
                data = "cleared"
            message = {"event_id": event_id, "data": data, "dp_rank": 0}
            try:
                tree.apply_event(1, json.dumps(message).encode())
            except RuntimeError:
                rejected[event["type"]] += 1
    return rejected


def compare(paths):
    runs = []
    for path in paths:
        with open(path) as f:
            runs.append(json.load(f))
    baseline = runs[0]
    try:
        import dynamo._core  # noqa: F401

        with_dynamo = True
    except ImportError:
        with_dynamo = False
    for run_ in runs:
        for config, result in run_["configs"].items():
            base_events = Counter(
                e for s in baseline["configs"][config]["streams"] for e in s
            )
            events = Counter(e for s in result["streams"] for e in s)
            row = dict(result["figures"])
            row["baseline_events_missing"] = sum((base_events - events).values())
            if with_dynamo:
                rejected = dynamo_rejections(result["streams"])
                row["dynamo_rejected_stores"] = rejected["BlockStored"]
                row["dynamo_rejected_removals"] = rejected["BlockRemoved"]
            print(run_["label"], config, json.dumps(row, sort_keys=True))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="JSON files; the first is the baseline")
    compare(parser.parse_args().runs)


if __name__ == "__main__":
    main()
