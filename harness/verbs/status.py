"""`status`: which tier of the series is on the vLLM of a Python environment."""

from harness.verbs import add_python_argument


def register(parser) -> None:
    parser.description = (
        "Say which vLLM PYTHON (default: this one) imports, which target and "
        "tier of the series `install` put on it (its receipt), the state of "
        "each file, and whether every other file of its vllm package is still "
        "what RECORD says, and whether the media packages of its environment "
        "(torchvision, torchaudio, torchcodec) load against its torch: vLLM "
        "does not start when one does not. Exit 0 when the package is as "
        "released or wholly patched by the receipt and the engine can start, "
        "1 when a file is neither (an interrupted install, a file changed by "
        "hand) or a media package does not load."
    )
    add_python_argument(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from harness.installed.installation import installation_lock
    from harness.installed.installed import locate
    from harness.installed.media import check_media

    located = locate(args.python)
    with installation_lock(located, shared=True):
        status = _status(located)
    if (advice := check_media(args.python).advice()) is not None:
        print(advice)
        return 1
    return status


def _status(located) -> int:
    """What the receipt and RECORD say, under the installation lock (shared):
    never a package half-written by an install."""
    from harness.installed.installation import RESTART
    from harness.installed.receipt import (
        RECEIPT,
        file_states,
        read_receipt,
        receipt_dir,
        record_mismatches,
    )

    print(f"{located.dist.describe()}, for {located.installed.python}")
    receipt = read_receipt(located)
    expected: set[str] = set()
    problems = 0
    if receipt is None:
        print("series: none installed")
    else:
        states = file_states(located, receipt)
        print(
            f"series: target {receipt.target}, {receipt.tier} tier (receipt "
            f"{receipt_dir(located) / RECEIPT})"
        )
        for path, state in states.items():
            print(f"  {path}: {state}")
        if set(states.values()) != {"patched"}:
            problems += 1
            print(
                "  not every file is patched: an install was stopped short; "
                f"{located.harness_command('uninstall')} puts back the released "
                "files"
            )
        else:
            print(f"  {RESTART}")
        expected = set(receipt.files)
    checked, differing = record_mismatches(located)
    unexpected = [path for path in differing if path not in expected]
    if unexpected:
        problems += 1
        print(f"RECORD: {len(unexpected)} of {checked} files differ from it:")
        print("".join(f"  {path}\n" for path in unexpected[:10]), end="")
        if len(unexpected) > 10:
            print(f"  ... {len(unexpected) - 10} more")
    elif expected:
        others = checked - len(expected)
        print(f"RECORD: the other {others} files of vllm/ are as released")
    else:
        print(f"RECORD: all {checked} files of vllm/ are as released")
    return 1 if problems else 0
