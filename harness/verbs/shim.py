"""`shim`: one of the consumers the harness measures, as a router of the
router protocol (docs/router-protocol.md), for `score --router-cmd`."""

from harness.routers import CONSUMER_NAMES
from harness.verbs import positive_int


def register(parser) -> None:
    parser.description = (
        "Answer the router protocol (docs/router-protocol.md) on stdin and "
        "stdout as one of the consumers the harness measures: the hash-set or "
        "content-tree router, the model of llm-d's rules, NVIDIA Dynamo 1.6.1's "
        "relay and indexer, or vllm-router 0.1.17's kv_aware policy (those two "
        "need the consumers extra). `python -m harness score --router NAME` "
        "runs it; `score --router-cmd 'python -m harness shim NAME'` is the "
        "same. It subscribes to the engine the greeting names, and ends when "
        "its stdin does."
    )
    parser.add_argument("name", choices=CONSUMER_NAMES, help="which consumer")
    parser.add_argument(
        "--block-size",
        type=positive_int,
        help="the router block size of llm-d-model, dynamo and vllm-router "
        "(default: the engine's cache block size, from the greeting)",
    )
    parser.set_defaults(run=run)


def run(args) -> int:
    from harness.engine.shims import serve

    return serve(args.name, args.block_size)
