"""Stop signals that end the harness cleanly, and children that end with it.

Ctrl-C raises KeyboardInterrupt in the main thread; `handle_stop_signals`
makes SIGTERM and SIGHUP raise `harness.errors.Stopped` the same way. So a
verb ended by any of them unwinds through its ``finally`` blocks (a checkout
is restored, scratch space removed) before `harness.cli.main` prints one line
and exits with 128 + the signal's number.

A child started with `run` leads a process group of its own, and on any
exception while it runs (a stop signal included) the whole group is killed
and waited for before the exception goes on: quilt's `patch`, pip's
`setup.py` end with the child, and nothing goes on writing after the harness
has cleaned up. A child left in the harness's own group could not be ended
with what it started without signalling the harness's parent too (a shell
script, tox). A terminal's Ctrl-C therefore reaches the harness, which ends
the child; children read no terminal (their stdin is /dev/null). They run
with GIT_OPTIONAL_LOCKS=0 (unless it is set): a git that only reads (status,
diff) then takes no .git/index.lock for its optional index refresh, which a
git ended with the harness would leave behind in the user's repository.

A child the harness only asks something (another Python where its vllm is)
runs with `run_bounded`: within a time and a byte bound on each of its
outputs, ended (with its group) past either, with a line naming the bound,
and within a bound on its memory (its address space), past which it fails
to allocate.
"""

import os
import resource
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

from harness.errors import STOP_SIGNALS, MissingDependency, Stopped
from harness.reading import size_in_words


def _raise_stopped(signum, frame) -> None:
    raise Stopped(signum)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def handle_stop_signals() -> dict:
    """Make SIGTERM and SIGHUP raise `Stopped` (a signal the process was
    started with ignored, as under nohup, stays ignored); return the handlers
    they had, for `restore_handlers`."""
    if not _in_main_thread():
        return {}
    return {
        signum: signal.signal(signum, _raise_stopped)
        for signum in STOP_SIGNALS
        if signum != signal.SIGINT and signal.getsignal(signum) != signal.SIG_IGN
    }


def restore_handlers(previous: dict) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def _stop_exception(signum: int) -> BaseException:
    return KeyboardInterrupt() if signum == signal.SIGINT else Stopped(signum)


@contextmanager
def stop_signals_held() -> Iterator[None]:
    """Hold stop signals back while the block runs (a restore that must not
    be cut short), then act on the first one that arrived.

    Children started in the block do not inherit the hold: they start with
    the default handlers, as every exec'd program does.
    """
    if not _in_main_thread():
        yield
        return
    arrived: list[int] = []
    previous = {
        signum: signal.signal(signum, lambda number, frame: arrived.append(number))
        for signum in STOP_SIGNALS
        if signal.getsignal(signum) != signal.SIG_IGN
    }
    try:
        yield
    finally:
        restore_handlers(previous)
        if arrived:
            raise _stop_exception(arrived[0])


def end_group(process: subprocess.Popen) -> None:
    """Kill a child started by `run` and everything in its process group."""
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with stop_signals_held():
        process.wait()
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            stream.close()


@contextmanager
def _child(command: list[str], **options) -> Iterator[subprocess.Popen]:
    """Start ``command`` in a process group of its own and kill the group on
    any exception while the block runs. Stop signals are held while it
    starts: one that arrived then is raised once the child is known, so a
    child that started is never left behind."""
    process = None
    given = options.get("env")
    options["env"] = {**(os.environ if given is None else given)}
    options["env"].setdefault("GIT_OPTIONAL_LOCKS", "0")
    try:
        with stop_signals_held():
            try:
                process = subprocess.Popen(command, process_group=0, **options)
            except (FileNotFoundError, PermissionError) as exc:
                if exc.filename not in (None, command[0]):
                    raise  # the working directory, not the program
                raise _not_runnable(command[0], exc) from None
        yield process
    except BaseException:
        if process is not None:
            end_group(process)
        raise


def _not_runnable(program: str, exc: OSError) -> MissingDependency:
    problem = (
        "is not on PATH"
        if isinstance(exc, FileNotFoundError)
        else (f"cannot be run ({exc.strerror})")
    )
    return MissingDependency(
        f"{program} {problem}; install it or fix PATH (README.md, Prerequisites)"
    )


def require_program(program: str, needed_for: str) -> None:
    """Refuse, before any work, a verb that needs ``program`` where it is not
    on PATH."""
    if shutil.which(program) is None:
        raise MissingDependency(
            f"{program} is not on PATH, and {needed_for}; install it or fix PATH "
            f"(README.md, Prerequisites)"
        )


def run(
    command: list[str],
    *,
    cwd=None,
    env: dict[str, str] | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess:
    """Run ``command`` to its end in a process group of its own, its output
    captured as text; on any exception the group is killed first. Bytes that
    are not UTF-8 (a file name, say) come through as surrogate escapes, as
    os.fsdecode gives them, so they never end a verb in a traceback."""
    with _child(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        encoding="utf-8",
        errors="surrogateescape",
    ) as process:
        stdout, stderr = process.communicate(input)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def last_words(result: subprocess.CompletedProcess) -> str:
    """What a failed child said last: its last line on stderr (stdout where
    stderr is empty), or its exit status where it said nothing."""
    said = (result.stderr or result.stdout or "").strip().splitlines()[-1:]
    return " ".join(said) or f"exit status {result.returncode}"


class BoundExceeded(Exception):
    """A child that `run_bounded` ended for running past one of its bounds;
    the message names the program and the bound, ``bound`` which one
    ("time", "stdout", "stderr" or "memory")."""

    def __init__(self, message: str, bound: str):
        super().__init__(message)
        self.bound = bound


def run_bounded(
    command: list[str],
    *,
    timeout_s: float,
    max_bytes: int,
    max_memory: int | None = None,
    cwd=None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """Run ``command`` as `run` does (its own process group, no stdin, output
    captured as text), within bounds: it must end within ``timeout_s``
    seconds and write at most ``max_bytes`` bytes on each of stdout and
    stderr. Past either, its whole group is killed and `BoundExceeded` says
    which bound it hit; so a child that hangs or floods costs at most that
    time and about twice that memory, never more. With ``max_memory``, its
    address space is bounded too (RLIMIT_AS, set as it starts): a Python
    past it fails with MemoryError, which `BoundExceeded` says."""
    program = command[0]
    deadline = time.monotonic() + timeout_s
    with _child(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        if max_memory is not None:
            _bound_memory(process.pid, max_memory)
        streams = {process.stdout.fileno(): "stdout", process.stderr.fileno(): "stderr"}
        read: dict[str, bytearray] = {name: bytearray() for name in streams.values()}
        with selectors.DefaultSelector() as selector:
            for descriptor in streams:
                selector.register(descriptor, selectors.EVENT_READ)
            while selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _too_long(program, timeout_s)
                for key, _ in selector.select(left):
                    chunk = os.read(key.fd, 1 << 16)
                    if not chunk:
                        selector.unregister(key.fd)
                        continue
                    name = streams[key.fd]
                    if len(read[name]) + len(chunk) > max_bytes:
                        raise BoundExceeded(
                            f"{program} wrote more than {max_bytes} bytes on "
                            f"{name}; it was ended",
                            name,
                        )
                    read[name] += chunk
        try:
            process.wait(timeout=max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            raise _too_long(program, timeout_s) from None
        process.stdout.close()
        process.stderr.close()
    stdout, stderr = (
        read[name].decode("utf-8", "surrogateescape") for name in ("stdout", "stderr")
    )
    if max_memory is not None and process.returncode and "MemoryError" in stderr:
        raise BoundExceeded(
            f"{program} needed more than the {size_in_words(max_memory)} of memory "
            f"it may use; it ended with MemoryError",
            "memory",
        )
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _bound_memory(pid: int, most: int) -> None:
    """Bound the address space of the child ``pid`` (never above the limit
    it inherited). Set from here, not in the child before it runs (no
    preexec_fn, which is unsafe beside threads); the child is a fresh
    interpreter that has not yet read anything it was asked about."""
    with suppress(ProcessLookupError, PermissionError):  # ended, or not ours
        _, hard = resource.prlimit(pid, resource.RLIMIT_AS)
        most = most if hard == resource.RLIM_INFINITY else min(most, hard)
        resource.prlimit(pid, resource.RLIMIT_AS, (most, hard))


def _too_long(program: str, timeout_s: float) -> BoundExceeded:
    return BoundExceeded(
        f"{program} did not finish within {timeout_s:g} s; it was ended", "time"
    )


def call(command: list[str], *, cwd=None, env: dict[str, str] | None = None) -> int:
    """Run ``command`` to its end in a process group of its own, its output
    going where the harness's goes (pytest's and pip's progress); on any
    exception the group is killed first. Its exit status."""
    with _child(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL) as process:
        return process.wait()


def follow(
    command: list[str],
    *,
    cwd=None,
    env: dict[str, str] | None = None,
    on_line: Callable[[str], None],
    every_s: float,
    tick: Callable[[], None],
) -> int:
    """Run ``command`` to its end in a process group of its own, each line of
    its output (stdout and stderr together) given to ``on_line`` as it comes,
    and ``tick`` called every ``every_s`` seconds while it runs; on any
    exception the group is killed first. Its exit status."""
    with _child(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    ) as process:
        reader = threading.Thread(
            target=lambda: [on_line(line) for line in process.stdout], daemon=True
        )
        reader.start()
        while True:
            try:
                process.wait(timeout=every_s)
                break
            except subprocess.TimeoutExpired:
                tick()
        reader.join()
        process.stdout.close()
        return process.returncode
