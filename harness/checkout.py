"""Where the project's checkout is: the pin file, the patches and the tests.

The harness works on a checkout of this repository: harness/targets.toml
names the patches directories, and `python -m harness test` runs the
conformance suite under tests/. When the harness is imported from a checkout
(``python -m harness`` at its top, or ``pip install -e .``), that checkout is
used; an installed copy (``pip install .``) looks in the current directory
and its parents.
"""

from pathlib import Path

from harness.errors import CheckoutError

PIN_FILE = Path("harness") / "targets.toml"


def _holds_project(directory: Path) -> bool:
    return (directory / PIN_FILE).is_file() and (directory / "patches").is_dir()


def root() -> Path:
    """The top of the checkout the harness works on: the one it is imported
    from, else the working directory or one of its parents (the working
    directory is read only then, so a removed one matters only there)."""
    package_parent = Path(__file__).resolve().parent.parent
    if _holds_project(package_parent):
        return package_parent
    try:
        cwd = Path.cwd().resolve()
    except OSError as exc:  # the working directory was removed
        raise CheckoutError(
            f"the harness is not run from a checkout of vllm-kv-events-series, "
            f"and the working directory to look in cannot be read "
            f"({exc.strerror}: removed?); run it from a clone of the project"
        ) from None
    for candidate in (cwd, *cwd.parents):
        if _holds_project(candidate):
            return candidate
    raise CheckoutError(
        f"no checkout of vllm-kv-events-series in {cwd} or its parents (looked "
        f"for {PIN_FILE} and patches/); run the harness from a clone of the "
        f"project"
    )


def targets_file() -> Path:
    return root() / PIN_FILE


def conformance_suite() -> Path:
    return root() / "tests" / "conformance"
