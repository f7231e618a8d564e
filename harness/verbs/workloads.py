"""`workloads`: seeded workloads inside a vLLM tree, their events recorded.

Run it with the tree first on the path: ``PYTHONPATH=<vllm tree>
VLLM_TARGET_DEVICE=cpu python -m harness workloads ...``.
"""

import json
import sys
from pathlib import Path

from harness.runs.drivers import CONFIGS
from harness.runs.scenarios import SCENARIOS


def register(parser) -> None:
    parser.add_argument("--config", choices=[*CONFIGS, *SCENARIOS])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--out", type=Path, help="record file")
    parser.add_argument("--stream", type=Path, help="also write KVEventBatch payloads")
    parser.add_argument(
        "--probes",
        type=int,
        default=0,
        metavar="N",
        help="also look N probe requests up at each quiet point (router fidelity)",
    )
    parser.add_argument(
        "--soak",
        action="store_true",
        help="run --ops operations per config (all pool/manager configs unless "
        "--config), sampling the series' bookkeeping size; prints JSON lines",
    )
    parser.add_argument("--sample-every", type=int, default=1000)
    parser.add_argument(
        "--serve",
        action="store_true",
        help="run workloads on request, one JSON object per line on stdin "
        "(harness.runs.worker)",
    )
    parser.set_defaults(run=run, usage_error=parser.error)


def run(args) -> int:
    import importlib.util

    if args.probes < 0:
        args.usage_error("--probes takes a number of probes, 0 or more")

    from harness.errors import WorkloadError

    if importlib.util.find_spec("vllm") is None:
        raise WorkloadError(
            "vllm cannot be imported here; run workloads with a vLLM tree first "
            "on the path: PYTHONPATH=<vllm tree>:. VLLM_TARGET_DEVICE=cpu python "
            "-m harness workloads ... (python -m harness fetch --target main "
            "prints a tree's path)"
        )
    from harness.runs import workloads
    from harness.runs.worker import serve

    if args.serve:
        return serve(workloads.handle)
    if args.soak:
        for config in [args.config] if args.config else CONFIGS:
            result = workloads.soak(config, args.seed, args.ops, args.sample_every)
            print(json.dumps(result))
            sys.stdout.flush()
        return 0
    if args.config is None or args.out is None:
        args.usage_error("--config and --out are required")
    if args.config in SCENARIOS:
        workloads.run_scenario(args.config, args.out, args.stream)
    else:
        workloads.run_workload(
            args.config, args.seed, args.ops, args.out, args.stream, args.probes
        )
    return 0
