"""A router as a child process that speaks the router protocol: the harness's side.

`RouterChild` starts the command a user gave (or a built-in router's,
harness.engine.shims) in a process group of its own, its stderr to a log
file, and exchanges harness.routers.protocol's messages over its stdin and
stdout. Every exchange is bounded: a reply must come within its time
(`protocol.READY_S`, `ANSWER_S`, `BYE_S`) and its line within
`protocol.MAX_LINE_BYTES`, and the harness's writes wait no longer than the
reply would (a router that never reads its stdin fails as late, it does not
hang the harness). The first reply that breaks the protocol ends the router
and raises harness.errors.RouterProtocolError naming it and the problem.

The router is ended on every path out (`close`, which every user calls in a
``finally``): SIGTERM to its group, so that a router can end what it runs
(vllm-router, started by its shim, leads a group of its own), then SIGKILL
to the group after `END_S`. Stop signals are held while it starts, as
harness.processes holds them, so a router that started is always known.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections import Counter
from contextlib import suppress
from pathlib import Path

from harness import processes
from harness.errors import MissingDependency, RouterProtocolError
from harness.log import shown
from harness.routers import protocol
from harness.routers.protocol import EXITED, LATE, OVERSIZED, Problem

# How long an ended router has between SIGTERM and SIGKILL, and after its
# ``bye`` before it is ended.
END_S = 5.0
READ_CHUNK = 1 << 16


class RouterChild:
    """One router child (module docstring); ``label`` names it in errors
    until its ``ready`` names it."""

    def __init__(self, command: list[str], log: Path, label: str, env=None):
        self.command = command
        self.label = label
        self.log = log
        self.readied: protocol.Ready | None = None
        self._due = ("ready", 0.0, 0.0)  # the reply due, by when, its bound
        self._asked = (0, 0)  # the ask awaiting its answer: id, after_seq
        self._buffer = bytearray()
        self._log_file = log.open("wb")
        try:
            with processes.stop_signals_held():
                self.process = subprocess.Popen(
                    command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=self._log_file, env=env, process_group=0, bufsize=0,
                )  # fmt: skip
        except (FileNotFoundError, PermissionError) as exc:
            self._log_file.close()
            raise MissingDependency(
                f"router {label}: {shown(command[0])} cannot be run "
                f"({exc.strerror}); check --router-cmd"
            ) from None
        except BaseException:
            self._log_file.close()
            raise
        os.set_blocking(self.process.stdin.fileno(), False)

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def hello(self, greeting: protocol.Greeting) -> protocol.Ready:
        """Greet the router; its ``ready``."""
        self.greet(greeting)
        return self.ready()

    def ask(self, number, after_seq, token_ids, block_hashes) -> protocol.Answer:
        """The router's answer for one request."""
        self.send_ask(number, after_seq, token_ids, block_hashes)
        return self.answer()

    def bye(self, after_seq: int = -1) -> Counter:
        """Say bye; the router's counts, once it has applied every batch up
        to ``after_seq``."""
        self.send_bye(after_seq)
        return self.bye_counts()

    # Each exchange in two halves, so that a session can send to every
    # router before it waits for the first reply; each reply is due within
    # its bound from when its message was sent.

    def greet(self, greeting: protocol.Greeting) -> None:
        self._send(greeting.as_json(), "ready", protocol.READY_S)

    def ready(self) -> protocol.Ready:
        self.readied = self._checked(protocol.check_ready, self._receive())
        self.label = self.readied.name or self.label
        return self.readied

    def send_ask(self, number, after_seq, token_ids, block_hashes) -> None:
        message = protocol.ask_message(number, after_seq, token_ids, block_hashes)
        self._send(message, "answer", protocol.ANSWER_S)
        self._asked = (number, after_seq)

    def answer(self) -> protocol.Answer:
        return self._checked(protocol.check_answer, self._receive(), *self._asked)

    def send_bye(self, after_seq: int) -> None:
        self._send(protocol.bye_message(after_seq), "bye", protocol.BYE_S)

    def bye_counts(self) -> Counter:
        """The router's counts; it is given END_S to exit by itself."""
        counts = self._checked(protocol.check_bye, self._receive())
        with suppress(subprocess.TimeoutExpired):
            self.process.wait(END_S)
        return counts

    def _checked(self, check, *args):
        try:
            return check(*args)
        except Problem as problem:
            raise self._failed(problem) from None

    def _send(self, message: dict, due: str, bound_s: float) -> None:
        self._due = (due, time.monotonic() + bound_s, bound_s)
        try:
            self._write(protocol.line_of(message), *self._due[1:])
        except Problem as problem:
            raise self._failed(problem) from None

    def _receive(self) -> dict:
        due, deadline, bound_s = self._due
        try:
            return protocol.parsed(self._line(deadline, bound_s, due), due)
        except Problem as problem:
            raise self._failed(problem) from None

    def _write(self, data: bytes, deadline: float, bound_s: float) -> None:
        fd = self.process.stdin.fileno()
        view = memoryview(data)
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_WRITE)
            while view:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    raise Problem(LATE, f"did not read its stdin within {bound_s:g} s")
                try:
                    view = view[os.write(fd, view) :]
                except BlockingIOError:
                    continue
                except (BrokenPipeError, ConnectionResetError):
                    raise Problem(EXITED, self._exit_words()) from None

    def _line(self, deadline: float, bound_s: float, due: str) -> bytes:
        fd = self.process.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while (end := self._buffer.find(b"\n")) < 0:
                if len(self._buffer) > protocol.MAX_LINE_BYTES:
                    raise self._oversized()
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    raise Problem(LATE, f"no {due!r} within {bound_s:g} s")
                chunk = os.read(fd, READ_CHUNK)
                if not chunk:
                    raise Problem(EXITED, f"before its {due!r}: {self._exit_words()}")
                self._buffer += chunk
        if end > protocol.MAX_LINE_BYTES:
            raise self._oversized()
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        return line

    def _oversized(self) -> Problem:
        return Problem(OVERSIZED, f"a line longer than {protocol.MAX_LINE_BYTES} bytes")

    def _exit_words(self) -> str:
        with suppress(subprocess.TimeoutExpired):
            self.process.wait(1.0)
        code = self.process.poll()
        said = "it closed its stdout" if code is None else f"it exited ({code})"
        return said + self._stderr_tail()

    def _stderr_tail(self) -> str:
        self._log_file.flush()
        with suppress(OSError):
            lines = self.log.read_bytes()[-4096:].decode("utf-8", "replace")
            last = [line for line in lines.splitlines() if line.strip()][-1:]
            if last:
                return f"; its stderr ends: {shown(last[0][-300:])}"
        return ""

    def _failed(self, problem: Problem) -> RouterProtocolError:
        """End the router; the error that names it and the problem."""
        self.close()
        return RouterProtocolError(self.label, problem.kind, problem.detail)

    def close(self) -> None:
        """End the router and everything in its process group (module
        docstring); safe to call again."""
        try:
            if self.process.returncode is None:
                _signal_group(self.process.pid, signal.SIGTERM)
                with suppress(subprocess.TimeoutExpired):
                    self.process.wait(END_S)
        finally:  # a second stop signal cuts the wait short, never the kill
            _signal_group(self.process.pid, signal.SIGKILL)
            with processes.stop_signals_held():
                self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            with suppress(OSError):
                stream.close()
        self._log_file.close()


def _signal_group(group: int, signum: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)
