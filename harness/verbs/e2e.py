"""`e2e`: a real vLLM engine's KV events, as released and with each tier overlaid."""

from pathlib import Path

from harness.engine.engine import DEFAULT_DTYPE, DEFAULT_TARGET, MAX_MODEL_LEN
from harness.routers import ROUTER_NAMES
from harness.targets import WHEELS
from harness.verbs import COST


def register(parser) -> None:
    parser.description = (
        "Run a tiny local model on the installed vLLM with KV events over ZMQ, "
        "as released and with each tier of the target's patched files "
        "overlaid, and check the captured streams. On CPU: `python -m harness "
        "e2e install` first "
        f"(target {DEFAULT_TARGET}'s CPU wheel). Costs, {COST}: `install` "
        "74 s in one run (a 133 MB wheel and its requirements; the environment "
        "is 3.5 GB with torch), `run` 102-156 s for 0.27-0.32 (the model, then "
        "three engine sessions of 26-53 s each; docs/releases.md); what each "
        "needs is checked before any work."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    install_parser = commands.add_parser(
        "install",
        help="install a target's wheel (wheels.cpu or wheels.gpu in "
        "harness/targets.toml) here, its sha256 checked first; needs the e2e "
        "extra",
    )
    install_parser.add_argument(
        "--target", default=DEFAULT_TARGET, help=f"default {DEFAULT_TARGET}"
    )
    install_parser.add_argument(
        "--wheel",
        choices=WHEELS,
        default="cpu",
        help="cpu (default): the CPU build, torch held at 2.13.0; gpu: the CUDA "
        "wheel with the torch it asks for (scripts/gpu_check.sh, on a GPU)",
    )
    install_parser.set_defaults(run=install)
    check = commands.add_parser(
        "run", help="pristine, default-tier and strict-tier sessions, checked"
    )
    check.add_argument(
        "--target",
        default=DEFAULT_TARGET,
        help="whose series to overlay; its vLLM release must be installed "
        f"(default {DEFAULT_TARGET})",
    )
    check.add_argument(
        "--dtype", default=DEFAULT_DTYPE, help=f"default {DEFAULT_DTYPE}"
    )
    check.add_argument("--seed", type=int, default=0)
    check.add_argument(
        "--report",
        type=Path,
        help="where to write the run's report as JSON (default: "
        "reports/e2e-TARGET.json in this checkout's folder of the cache, "
        "checkouts/CHECKOUT/)",
    )
    check.set_defaults(run=run)
    routers = commands.add_parser(
        "routers",
        help="released, default-tier and strict-tier sessions with every "
        "consumer subscribed to the engine through the router protocol, each "
        "request asked of them first: their predicted hits against the "
        "engine's, with each router's own counts (`score` with every built-in "
        "router; the consumers extra; docs/consumers.md)",
    )
    routers.add_argument(
        "--target", default=DEFAULT_TARGET, help=f"default {DEFAULT_TARGET}"
    )
    routers.add_argument(
        "--dtype", default=DEFAULT_DTYPE, help=f"default {DEFAULT_DTYPE}"
    )
    routers.add_argument("--seed", type=int, default=0)
    routers.add_argument(
        "--each-patch",
        action="store_true",
        help="also one session with each patch of the strict tier alone "
        "(one engine session each)",
    )
    routers.add_argument(
        "--router",
        dest="routers",
        action="append",
        choices=ROUTER_NAMES,
        help="repeat for several (default: every one)",
    )
    routers.set_defaults(run=run_routers)
    model = commands.add_parser(
        "model",
        help="write the tiny local model the sessions run (a random-weight "
        "GraniteMoeHybrid, one Mamba2 and one attention layer, and its "
        "tokenizer) to a new or empty directory and print its path, to try an "
        f"engine offline (its context: {MAX_MODEL_LEN} tokens); needs torch, "
        "transformers and tokenizers, in any Python that has them (an "
        "engine's: ENGINE -m harness e2e model, in this checkout)",
    )
    model.add_argument(
        "--out", type=Path, required=True, help="a new or empty directory"
    )
    model.set_defaults(run=write_model)
    engine = commands.add_parser("engine", help="one engine session (internal)")
    engine.add_argument("--model", type=Path, required=True)
    engine.add_argument("--endpoint", required=True)
    engine.add_argument("--dtype", required=True)
    engine.add_argument("--seed", type=int, required=True)
    engine.add_argument(
        "--requests", type=Path, help="write each request served (a record file)"
    )
    engine.add_argument(
        "--gate", help="a REQ endpoint asked before each request (internal)"
    )
    engine.add_argument("--topic", default="kv", help="the events' topic (internal)")
    engine.add_argument(
        "--replay-endpoint",
        help="the replay endpoint the engine's publisher binds (internal)",
    )
    engine.set_defaults(run=engine_session)
    dtype = commands.add_parser(
        "engine-dtype",
        help="print the dtype the installed engine can run the model in (internal)",
    )
    dtype.add_argument("--dtype", required=True, help="the dtype asked for")
    dtype.set_defaults(run=engine_dtype)


def install(args) -> int:
    from harness.errors import MissingDependency
    from harness.targets import get_target
    from harness.trees.deps import TORCH_PIN
    from harness.trees.preflight import missing, require_extra
    from harness.trees.wheel import install_wheel

    wheel = get_target(args.target).wheel(args.wheel)
    require_extra("e2e")
    if args.wheel == "cpu" and missing(["torch"]):
        raise MissingDependency(
            f"torch is not installed here; pip install {TORCH_PIN} (the CPU "
            f"wheel) before {wheel.requirement}, or use `tox -e e2e`"
        )
    install_wheel(wheel, args.wheel)
    return 0


def require_engine(target: str, *extras: str) -> None:
    """The extras named, then an installed vllm, or one line saying what is
    missing (harness.trees.preflight)."""
    from harness.errors import E2EError
    from harness.trees.preflight import extra, missing, require

    require(*(extra(name) for name in extras), toxenv="e2e")
    if missing(["vllm"]):
        raise E2EError(
            f"vllm is not installed here; run `python -m harness e2e install "
            f"--target {target}` first, or use `tox -e e2e`"
        )


def run(args) -> int:
    from harness import cache
    from harness.engine.e2e import check_report_path, end_to_end, write_report

    require_engine(args.target, "capture")
    report = args.report or cache.e2e_report(args.target)
    if args.report is None:
        cache.claim_checkout_dir()
    check_report_path(report)
    outcome = end_to_end(args.target, args.dtype, args.seed)
    print(outcome.render(), flush=True)
    write_report(report, outcome.as_json())
    print(f"e2e report written to {report}")
    return 0


def run_routers(args) -> int:
    from harness.engine.e2e import TIERS
    from harness.engine.engine_routers import builtin_routers
    from harness.engine.score import render_requests, score_end_to_end
    from harness.routers import INDEX_NAMES
    from harness.routers.real_routers import render

    require_engine(args.target, "capture", "consumers")
    names = [*INDEX_NAMES, "llm-d-model", *(args.routers or ROUTER_NAMES)]
    outcome = score_end_to_end(
        args.target,
        args.dtype,
        builtin_routers(names),
        args.seed,
        tiers=TIERS,
        alone=args.each_patch,
    )
    print(render(outcome.table()))
    for session in outcome.sessions.values():
        print(render_requests(session) + "\n")
    print(f"end to end, routers subscribed: {outcome.wall_s:.0f} s")
    if errors := outcome.errors():
        raise errors[0][1]
    return 0


def write_model(args) -> int:
    """Build the e2e sessions' model in --out and print its path."""
    import sys

    from harness import cache, scratch
    from harness.engine import engine
    from harness.errors import MissingDependency, OutputError
    from harness.installed.media import media_blocked
    from harness.log import progress
    from harness.trees.preflight import missing

    out = scratch.absolute(args.out, "--out")
    scratch.within_path_max(out, "--out")
    cache.outside_trees(out, "--out")
    try:
        taken = out.exists() and not (out.is_dir() and not any(out.iterdir()))
    except OSError as exc:  # a name over NAME_MAX, a path over PATH_MAX
        raise OutputError(f"cannot make --out {out}: {exc.strerror}") from None
    if taken:
        raise OutputError(
            f"--out {out} exists and is not an empty directory; remove it or "
            f"choose another"
        )
    if gone := missing(["torch", "transformers", "tokenizers"]):
        raise MissingDependency(
            f"{', '.join(gone)} not installed for {sys.executable}; the model is "
            f"built with torch, transformers and tokenizers: run this with a "
            f"Python that has them (an engine's venv: ENGINE -m harness e2e "
            f"model in this checkout)"
        )
    progress(f"e2e: building the tiny model in {out}")
    with media_blocked():  # the model needs none; one may not load here
        parts = _model_parts(engine)
        try:
            with (
                scratch.folders(out.parent),
                scratch.directory(out.parent, "model") as building,
            ):
                engine.save_model(parts, building)
                if out.is_dir():
                    out.rmdir()  # empty, as checked: the built model takes its place
                building.rename(out)
        except OSError as exc:
            raise OutputError(f"cannot write {out}: {exc.strerror or exc}") from None
    print(out)
    progress(
        f"e2e: the model's context is {engine.MAX_MODEL_LEN} tokens, prompt and "
        f"output together (vLLM refuses a longer request)"
    )
    return 0


def _model_parts(engine):
    """`engine.make_model()`, or one line naming the package that does not
    load (BrokenDependency): never taken for a write that failed."""
    import sys

    from harness.errors import BrokenDependency

    try:
        return engine.make_model()
    except (ImportError, OSError, RuntimeError) as exc:
        cause, seen = exc, {id(exc)}
        while (earlier := cause.__cause__ or cause.__context__) is not None:
            if id(earlier) in seen:
                break
            cause = earlier
            seen.add(id(cause))
        lines = str(cause).strip().splitlines()
        said = f"{type(cause).__name__}: {lines[-1] if lines else ''}"
        raise BrokenDependency(
            f"torch or transformers does not load for {sys.executable} ({said}); "
            f"repair that environment, or run this with a Python whose torch "
            f"and transformers import"
        ) from None


def engine_session(args) -> int:
    from harness.engine.engine import engine_session

    engine_session(
        args.model,
        args.endpoint,
        args.dtype,
        args.seed,
        args.requests,
        args.gate,
        args.topic,
        args.replay_endpoint,
    )
    return 0


def engine_dtype(args) -> int:
    from harness.engine.engine import engine_dtype

    print(engine_dtype(args.dtype))
    return 0
