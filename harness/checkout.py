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
    """The top of the checkout the harness works on."""
    package_parent = Path(__file__).resolve().parent.parent
    cwd = Path.cwd().resolve()
    for candidate in (package_parent, cwd, *cwd.parents):
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
