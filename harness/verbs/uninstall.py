"""`uninstall`: the series taken off the vLLM installed in a Python environment."""

from harness.verbs import add_python_argument


def register(parser) -> None:
    parser.description = (
        "Put the released files back over the vllm package installed for "
        "PYTHON (default: this one), from the receipt `install` left beside it: "
        "no tier, no sdist and no network needed. Each file must be the "
        "released or the patched one; RECORD is restored byte for byte. "
        "Nothing installed is not an error. Takes a second; restart the engine "
        "afterwards."
    )
    add_python_argument(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from harness.installed.installation import RESTART, uninstall
    from harness.installed.installed import locate

    located = locate(args.python)
    receipt = uninstall(located)
    if receipt is None:
        print(f"no series is installed on {located.dist.describe()}; nothing to do")
        return 0
    print(
        f"took target {receipt.target}'s {receipt.tier} tier off "
        f"{located.dist.describe()}: {len(receipt.files)} file(s) as released again"
    )
    print(RESTART)
    return 0
