"""`consumers`: what Dynamo's radix tree rejects, pristine against patched."""

from harness.routers import DEFAULT_OPS, DEFAULT_SEEDS
from harness.targets import TIERS
from harness.verbs import COST, add_target_arguments, positive_int


def register(parser) -> None:
    parser.description = (
        "Run the seeded workloads in the pristine and the patched trees of a "
        "target, apply their KV events to NVIDIA Dynamo's RadixTree and print "
        "rejected stores and removals per cause. Needs the harness's consumers "
        "extra (ai-dynamo-runtime) and vLLM's requirements (`python -m harness "
        f"deps`), checked before any work. Costs, {COST}: docs/consumers.md "
        "gives the runs measured; `tox -e consumers` sets it all up (2.9 GB)."
    )
    add_target_arguments(parser, target_default="main", several_tiers=True)
    parser.add_argument(
        "--seeds",
        type=positive_int,
        default=DEFAULT_SEEDS,
        metavar="N",
        help=f"run seeds 0..N-1 (default {DEFAULT_SEEDS})",
    )
    parser.add_argument(
        "--ops",
        type=positive_int,
        default=DEFAULT_OPS,
        metavar="N",
        help=f"operations per seeded workload (default {DEFAULT_OPS})",
    )
    parser.set_defaults(run=run)


def run(args) -> int:
    from harness.routers.replay import compare, render
    from harness.trees.preflight import extra, require, vllm_requirements

    require(extra("consumers"), vllm_requirements(args.target), toxenv="consumers")
    comparisons = compare(args.target, args.tiers or list(TIERS), args.seeds, args.ops)
    print(render(comparisons))
    return 0
