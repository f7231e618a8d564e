"""An engine session in a process group of its own, and its captured stream.

This process subscribes (harness.contract.subscribe, which binds) before the
engine starts publishing, captures every payload until the engine has exited
and the stream has been quiet for a while, and kills whatever is left of the
engine's process group at the end. The capture checks the publisher's
sequence numbers: what it missed (the start of the stream, when the
engine's publisher connected late under load, or a message dropped later) is
asked of the engine's replay endpoint at once, while the engine still holds
it; what the replay cannot give fails the session with the missing range
named, since the judge would read a stream with a hole as violations. The
engine also writes each request it served (tokens, hashes, when it was sent,
its cached tokens), for the session's router fidelity (harness.engine.judge).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from harness import processes
from harness.contract.records import ServedRequest, read_records
from harness.errors import E2EError
from harness.log import progress
from harness.trees.env import STREAM_ENV, tree_env

SESSION_BUDGET_S = 300
# How long the stream must stay quiet after the engine's exit before the
# capture ends.
QUIET_S = 2.0
ALARM_EVERY_S = 0.5


class CaptureOver(Exception):
    """Raised from SIGALRM to end the capture's blocking wait."""


@dataclass
class Session:
    label: str
    payloads: list[bytes]
    wall_s: float
    returncode: int | None  # None: killed at the time budget
    # `ps` lines of the session's process group once its leader had exited,
    # before the group was killed, and after.
    outlived_leader: list[str]
    survivors: list[str]
    log_tail: str
    # The requests the engine served, in the order it served them.
    requests: list[ServedRequest] = field(default_factory=list)
    # (first, last) of each range of messages the replay endpoint gave.
    replayed: list[tuple[int, int]] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def group_processes(group: int) -> list[str]:
    """`ps` lines of the live processes in a process group."""
    result = subprocess.run(
        ["ps", "-o", "pid=,stat=,args=", "-g", str(group)],
        capture_output=True,
        text=True,
    )
    return [
        line.strip()
        for line in result.stdout.splitlines()
        if line.split()[1][0] != "Z"  # zombies are dead already
    ]


def engine_env() -> dict[str, str]:
    """The installed vllm's environment with the hash seed pinned (the
    pristine and the patched sessions' streams are compared), and the CPU
    engine's settings (a GPU engine ignores them)."""
    return tree_env(
        None,
        **STREAM_ENV,
        VLLM_CPU_KVCACHE_SPACE="1",
        VLLM_CPU_OMP_THREADS_BIND="nobind",
    )


def capture_until_quiet(
    endpoint: str,
    engine: subprocess.Popen,
    deadline: float,
    replay: str | None = None,
    replayed: list[tuple[int, int]] | None = None,
) -> list[bytes]:
    """KVEventBatch payloads from ``endpoint``, in the order of their sequence
    numbers, until the engine has exited and the stream has been quiet for
    QUIET_S, or until ``deadline``. A message missing from the numbers is
    asked of ``replay``, the engine's replay endpoint (``replayed`` gets the
    ranges it gave); one still missing at the end is an E2EError naming it.

    The subscription blocks while it waits for a message, so a periodic
    SIGALRM checks the two conditions and ends the wait by raising
    CaptureOver.
    """
    from harness.contract.replay import with_replay
    from harness.contract.subscribe import SequenceCheck, subscribe_numbered

    payloads: list[bytes] = []
    sequence = SequenceCheck()
    last_message = time.monotonic()
    over = False

    def on_alarm(signum, frame):
        nonlocal over
        now = time.monotonic()
        quiet = engine.poll() is not None and now - last_message >= QUIET_S
        if not over and (quiet or now > deadline):
            over = True
            raise CaptureOver

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, ALARM_EVERY_S, ALARM_EVERY_S)
    try:
        messages = subscribe_numbered(
            endpoint, topic="kv", timeout=deadline - time.monotonic()
        )
        try:
            for seq, payload, _ in with_replay(messages, replay, "kv", replayed):
                sequence.see(seq)
                payloads.append(payload)
                last_message = time.monotonic()
        finally:
            messages.close()
    except CaptureOver:
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if (missing := sequence.incomplete()) is not None:
        asked = (
            f"the replay endpoint {replay} no longer held them"
            if replay
            else "no replay endpoint to ask"
        )
        raise E2EError(
            f"the capture of the engine's stream at {endpoint} is not whole: "
            f"{missing}; {asked}, and a stream with a hole would read as "
            f"contract violations"
        )
    return payloads


def kill_group(group: int) -> list[str]:
    """SIGKILL a process group; return what is still alive after a while."""
    with suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
    for _ in range(50):
        survivors = group_processes(group)
        if not survivors:
            break
        time.sleep(0.1)
    return survivors


def probe_dtype(dtype: str) -> str:
    """The dtype the installed engine can run the model in, asked in a
    process of its own (harness.engine.engine.engine_dtype imports vllm)."""
    command = [sys.executable, "-m", "harness", "e2e", "engine-dtype"]
    result = processes.run([*command, "--dtype", dtype], env=engine_env())
    words = result.stdout.split()
    if result.returncode != 0 or not words:
        reason = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise E2EError(
            f"cannot ask the installed vllm which dtype it runs the model in "
            f"(exit {result.returncode}: {reason})"
        )
    return words[-1]


def engine_command(
    model: Path,
    endpoint: str,
    dtype: str,
    seed: int,
    requests: Path,
    replay: str | None = None,
) -> list[str]:
    """The engine session's command (``python -m harness e2e engine``), with
    ``replay`` the replay endpoint its publisher binds."""
    command = [
        sys.executable, "-m", "harness", "e2e", "engine", "--model", str(model),
        "--endpoint", endpoint, "--dtype", dtype, "--seed", str(seed),
        "--requests", str(requests),
    ]  # fmt: skip
    return command if replay is None else [*command, "--replay-endpoint", replay]


class EngineProcess:
    """An engine session's process in a process group of its own, its
    output to ``log``. Leaving the ``with`` block takes its exit status
    (None while it still runs: killed at the time budget) and the `ps` lines
    of its group once the leader had exited, then kills the group and takes
    what survived."""

    def __init__(self, command: list[str], log: Path):
        self.command = command
        self.log = log
        self.returncode: int | None = None
        self.outlived: list[str] = []
        self.survivors: list[str] = []

    def __enter__(self) -> EngineProcess:
        with self.log.open("w") as log_file:
            self.process = subprocess.Popen(
                self.command,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=engine_env(),
                start_new_session=True,
            )
        return self

    def __exit__(self, *exc_info) -> None:
        try:
            self.returncode = self.process.poll()
            if self.returncode is not None:
                self.outlived = group_processes(self.process.pid)
        finally:
            self.survivors = kill_group(self.process.pid)
            self.process.wait()

    def log_tail(self) -> str:
        return "\n".join(self.log.read_text().splitlines()[-30:])


def run_session(
    label: str, model: Path, dtype: str, seed: int, budget_s: float
) -> Session:
    """Run an engine session in its own process group while capturing its
    KV events; kill whatever is left of the group at the end."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    replay = f"tcp://127.0.0.1:{free_port()}"
    replayed: list[tuple[int, int]] = []
    with tempfile.TemporaryDirectory() as scratch:
        requests = Path(scratch) / "requests.rec"
        command = engine_command(model, endpoint, dtype, seed, requests, replay)
        started = time.monotonic()
        with EngineProcess(command, Path(scratch) / "engine.log") as engine:
            progress(f"e2e: {label} engine session started (pid {engine.process.pid})")
            payloads = capture_until_quiet(
                endpoint, engine.process, started + budget_s, replay, replayed
            )
        for first, last in replayed:
            progress(
                f"e2e: {label} session: messages {first}-{last} the capture "
                f"missed were replayed from {replay}"
            )
        return Session(
            label=label,
            payloads=payloads,
            wall_s=time.monotonic() - started,
            returncode=engine.returncode,
            outlived_leader=engine.outlived,
            survivors=engine.survivors,
            log_tail=engine.log_tail(),
            requests=served_requests(requests),
            replayed=replayed,
        )


def served_requests(path: Path) -> list[ServedRequest]:
    """What the engine wrote of the requests it served (none if it wrote
    nothing, having failed first)."""
    if not path.is_file():
        return []
    return [r for r in read_records(path) if isinstance(r, ServedRequest)]
