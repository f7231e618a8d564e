"""`fidelity`: how well a router that indexes the stream predicts the
engine's hits, pristine against patched."""

from pathlib import Path

from harness.routers import (
    CONSUMER_NAMES,
    DEFAULT_OPS,
    DEFAULT_PROBES,
    DEFAULT_SEEDS,
    ROUTER_NAMES,
)
from harness.targets import TIERS
from harness.verbs import COST, add_target_arguments
from harness.workloads.drivers import CONFIGS, WORKLOADS


def register(parser) -> None:
    parser.description = (
        "Run the seeded workloads with probe requests in the pristine and the "
        "patched trees of a target, replay each stream into the content-tree "
        "router (vLLM's own lookup rules over what the events make live, a "
        "store under a parent it lacks refused) and compare "
        "its predicted hits with the hits the engine's lookup gives: exact, "
        "over- and under-predicted, per config, tree and KV cache group. "
        "--dynamo adds NVIDIA Dynamo's RadixTree (needs the consumers extra, "
        "ai-dynamo-runtime). docs/consumers.md, 'Router fidelity'. Needs "
        "vLLM's requirements (`python -m harness deps`), checked before any "
        f"work. Costs, {COST}: 180 s with --dynamo and the trees cached on two "
        "busy cores (docs/consumers.md), 0.5 GB of harness cache per target for "
        "its trees. --router measures "
        "every consumer instead and opens with 'who gains what', tree by "
        "consumer (docs/operators.md)."
    )
    add_target_arguments(parser, target_default="main", several_tiers=True)
    parser.add_argument(
        "--tree",
        dest="trees",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="another vLLM tree to measure beside the tiers' (a design being "
        "compared, say); repeat for several",
    )
    parser.add_argument(
        "--config",
        dest="configs",
        action="append",
        choices=list(WORKLOADS),
        help="repeat for several (default: every config of incremental report mode)",
    )
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS)
    parser.add_argument("--ops", type=int, default=DEFAULT_OPS)
    parser.add_argument(
        "--probes",
        type=int,
        default=DEFAULT_PROBES,
        help=f"probe requests per quiet point (default {DEFAULT_PROBES})",
    )
    parser.add_argument(
        "--dynamo", action="store_true", help="also Dynamo's RadixTree's predictions"
    )
    parser.add_argument(
        "--router",
        dest="routers",
        action="append",
        choices=CONSUMER_NAMES,
        help="instead, replay each stream into the hash-set and content-tree "
        "routers (always) and into this consumer, at the hash and each cache "
        "block size: llm-d-model (llm-d's rules, a model), dynamo (Dynamo's "
        "relay and indexer) or vllm-router (its kv_aware policy; these two "
        "need the consumers extra); repeat for several. The table opens with "
        "'who gains what': tree by consumer",
    )
    parser.set_defaults(run=run, usage_error=parser.error)


def given_trees(args) -> dict[str, Path]:
    """The --tree options, checked before anything is fetched."""
    trees: dict[str, Path] = {}
    for given in args.trees:
        name, _, path = given.partition("=")
        if not name or not path or name in trees or name in ("pristine", *TIERS):
            args.usage_error(f"--tree {given}: give NAME=PATH with a new NAME")
        if not Path(path, "vllm").is_dir():
            args.usage_error(f"--tree {given}: {path} holds no vllm package")
        trees[name] = Path(path)
    return trees


def named_trees(args, given: dict[str, Path]) -> dict[str, Path]:
    from harness.series.apply import cached_patched_tree
    from harness.targets import get_target
    from harness.trees.sources import pristine_tree

    target = get_target(args.target)
    trees = {"pristine": pristine_tree(target)}
    for tier in args.tiers or list(TIERS):
        trees[tier] = cached_patched_tree(target, tier)
    return trees | given


def run(args) -> int:
    from harness.routers.dynamo import dynamo_core
    from harness.routers.fidelity_table import measure, render
    from harness.targets import get_target
    from harness.trees.preflight import extra, require, vllm_requirements

    if args.seeds < 1 or args.ops < 1 or args.probes < 1:
        args.usage_error("--seeds, --ops and --probes take a positive number")
    given = given_trees(args)
    target = get_target(args.target)
    consumers = args.dynamo or bool(set(args.routers or ()) & set(ROUTER_NAMES))
    require(
        vllm_requirements(target.name),
        extra("consumers") if consumers else None,
        toxenv="consumers" if consumers else target.toxenv("default"),
    )
    if args.routers:
        return run_real_routers(args, given)
    if args.dynamo:
        dynamo_core()
    table = measure(
        named_trees(args, given),
        args.configs or list(CONFIGS),
        args.seeds,
        args.ops,
        args.probes,
        args.dynamo,
    )
    print(render(table))
    return 0


def run_real_routers(args, given: dict[str, Path]) -> int:
    from harness.routers.real_routers import measure_routers, render

    table = measure_routers(
        named_trees(args, given),
        args.configs or list(CONFIGS),
        args.seeds,
        args.ops,
        dict.fromkeys(args.routers),
        args.probes,
    )
    print(render(table))
    return 0
