"""`deps`: pip install what a target's upstream tests import."""

from harness.verbs import COST, add_target_arguments


def register(parser) -> None:
    parser.description += (
        ": vLLM's requirements/common.txt of the target's tree and what its "
        f"tests import besides, into this environment. Costs, {COST}: 1 to "
        "11 min, as pip and the machine's load allow (51 s for 0.33.0 with "
        "torch already in the venv, 10 min 55 s under load), and 2.6 GB, the "
        "torch 2.13.0 CPU wheel included."
    )
    add_target_arguments(parser, tier=False)
    parser.set_defaults(run=run)


def run(args) -> int:
    from harness.targets import get_target
    from harness.trees.deps import install_test_requirements
    from harness.trees.preflight import require_pip

    target = get_target(args.target)
    require_pip()
    return install_test_requirements(target)
