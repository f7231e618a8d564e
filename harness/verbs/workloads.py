"""`workloads`: seeded workloads inside a vLLM tree, their events recorded.

Run it with the tree first on the path: ``PYTHONPATH=<vllm tree>
VLLM_TARGET_DEVICE=cpu python -m harness workloads ...``.

Every option and file is checked before the work: the numbers are in range
(a record stores the seed and the count of operations as 64-bit integers),
and --out and --stream can be written. Both files are written under scratch
names beside them and renamed into place when the run is whole, so a run
that fails or is stopped leaves them as they were.
"""

import json
import os
import sys
from pathlib import Path

from harness.verbs import positive_int, whole_number
from harness.workloads.drivers import CONFIGS, WORKLOADS
from harness.workloads.scenarios import SCENARIOS

# The most operations or probes a run takes (far beyond any that ends).
MOST = 10**9


def register(parser) -> None:
    parser.add_argument("--config", choices=[*WORKLOADS, *SCENARIOS])
    parser.add_argument(
        "--seed", type=whole_number(-(2**63), 2**64 - 1), default=0, metavar="S"
    )
    parser.add_argument("--ops", type=whole_number(0, MOST), default=200, metavar="N")
    parser.add_argument("--out", type=Path, help="record file")
    parser.add_argument("--stream", type=Path, help="also write KVEventBatch payloads")
    parser.add_argument(
        "--probes",
        type=whole_number(0, MOST),
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
    parser.add_argument("--sample-every", type=positive_int, default=1000, metavar="N")
    parser.add_argument(
        "--serve",
        action="store_true",
        help="run workloads on request, one JSON object per line on stdin "
        "(harness.workloads.worker)",
    )
    parser.set_defaults(run=run, usage_error=parser.error)


def run(args) -> int:
    import importlib.util

    from harness.errors import OutputError, WorkloadError
    from harness.verbs import writable_file

    if not args.serve and not args.soak:
        if args.config is None or args.out is None:
            args.usage_error("--config and --out are required")
        if args.stream is not None and _same_file(args.out, args.stream):
            args.usage_error("--out and --stream name the same file")
        for path in (args.out, args.stream):
            if path is not None and (problem := writable_file(path)):
                raise OutputError(problem)

    if importlib.util.find_spec("vllm") is None:
        raise WorkloadError(
            "vllm cannot be imported here; run workloads with a vLLM tree first "
            "on the path: PYTHONPATH=<vllm tree>:. VLLM_TARGET_DEVICE=cpu python "
            "-m harness workloads ... (python -m harness fetch --target main "
            "prints a tree's path)"
        )
    from harness.workloads import workloads
    from harness.workloads.worker import serve

    if args.serve:
        return serve(workloads.handle)
    if args.soak:
        for config in [args.config] if args.config else CONFIGS:
            result = workloads.soak(config, args.seed, args.ops, args.sample_every)
            print(json.dumps(result))
            sys.stdout.flush()
        return 0
    _record(args, workloads)
    return 0


def _record(args, workloads) -> None:
    """Run the workload into scratch files beside --out and --stream, then
    rename them into place."""
    from contextlib import ExitStack

    from harness import scratch
    from harness.errors import OutputError

    try:
        with ExitStack() as stack:
            out_dir = stack.enter_context(
                scratch.directory(args.out.parent, "workloads")
            )
            out = out_dir / "records"
            stream = None
            if args.stream is not None:
                stream_dir = stack.enter_context(
                    scratch.directory(args.stream.parent, "workloads")
                )
                stream = stream_dir / "stream"
            if args.config in SCENARIOS:
                workloads.run_scenario(args.config, out, stream)
            else:
                workloads.run_workload(
                    args.config, args.seed, args.ops, out, stream, args.probes
                )
            if stream is not None:
                os.replace(stream, args.stream)
            os.replace(out, args.out)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise OutputError(
            f"cannot write {args.out}: {exc.strerror or exc}{where}"
        ) from None


def _same_file(first: Path, second: Path) -> bool:
    return os.path.abspath(first) == os.path.abspath(second)
