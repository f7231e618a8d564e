"""What a case of harness.workloads.calls costs in one tree: the Python lines
its calls execute, the events they queue and their bytes on the wire.

`measure` runs the cases in a child process that imports vLLM from the tree
(`python -m harness.workloads.call_count OUT CASE ...`) and writes their
figures to OUT as a JSON object, each with the case's title; the export
quotes them (harness.submission.call_cost), the benchmarks count with
`count`. vLLM is imported only inside the functions.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from harness.workloads.call_cases import build, note, title
from harness.workloads.calls import WORKLOAD, Unsupported

BLOCK_POOL = Path("vllm/v1/core/block_pool.py")


def traced_lines(call, *args) -> int:
    """The Python lines ``call(*args)`` executes (``sys.settrace``)."""
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    sys.settrace(lambda frame, event, arg: local)
    try:
        call(*args)
    finally:
        sys.settrace(None)
    return count


def wire_bytes(events: list) -> int:
    """The events' bytes as one ``KVEventBatch`` (vLLM's msgspec encoder)."""
    import msgspec
    from vllm.distributed.kv_events import KVEventBatch

    if not events:
        return 0
    return len(msgspec.msgpack.encode(KVEventBatch(ts=0.0, events=events)))


def count(fresh, call, lines: bool = True) -> dict[str, list[int] | None]:
    """Lines, events and bytes of ``call`` in two fresh set-ups, after a
    warm-up call (one-time imports and caches are not counted); the two
    counts show the figure repeats. The events are taken from the set-up's
    first object: per step or as published where it keeps them so
    (``take_batches``: calls.Steps, scheduler_calls.Published), else as one
    batch. ``lines`` False: not counted (None)."""
    call(*fresh())
    counts, emitted, sizes = [], [], []
    for _ in range(2):
        args = fresh()
        if lines:
            counts.append(traced_lines(call, *args))
        else:
            call(*args)
        source = args[0]
        batches = (
            source.take_batches()
            if hasattr(source, "take_batches")
            else [source.take_events()]
        )
        emitted.append(sum(map(len, batches)))
        sizes.append(sum(map(wire_bytes, batches)))
    return {"lines": counts or None, "events": emitted, "bytes": sizes}


def as_the_engine_runs() -> None:
    """Cache vLLM's environment variables, as the engine does once it has
    started (``vllm.envs.enable_envs_cache``, where the release has it):
    without it every ``maybe_convert_block_hash`` reads the environment
    again, which no engine does."""
    import vllm.envs as envs

    enable = getattr(envs, "enable_envs_cache", None)
    if enable is not None:
        enable()


def measure(tree: Path, cases: tuple[str, ...], out: Path) -> dict[str, Any]:
    """Each case's figures on ``tree`` (None for a call the tree lacks), in
    a child process that imports vLLM from it and writes them to ``out``;
    nothing for a tree without vLLM's block pool (a test's tiny tree)."""
    from harness import processes
    from harness.errors import WorkloadError
    from harness.trees.env import tree_env

    if not (tree / BLOCK_POOL).is_file():
        return {}
    result = processes.run(
        [sys.executable, "-m", __name__, str(out), *cases],
        env=tree_env(tree, PYTHONDONTWRITEBYTECODE="1"),
    )
    if result.returncode != 0:
        raise WorkloadError(
            f"measuring the calls in {tree}: {processes.last_words(result)}"
        )
    return json.loads(out.read_text(encoding="utf-8"))


def main(argv: list[str]) -> int:
    out, cases = Path(argv[0]), argv[1:]
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # vLLM logs to stdout
    as_the_engine_runs()
    figures: dict[str, Any] = {}
    for case in cases:
        try:
            counted = count(*build(case), lines=not case.startswith(WORKLOAD))
            figures[case] = {"title": title(case), "note": note(case), **counted}
        except Unsupported:
            figures[case] = None
    out.write_text(json.dumps(figures), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
