"""Which cases measure a call a change makes to vLLM, and every case's
builder and title: harness.workloads.calls's block-pool and manager cases,
and harness.workloads.scheduler_calls's scheduler cases.

A change is measured by the functions it changes (path in the tree, then
the qualified name): `CASES_BY_CALL` gives, for each call on the scheduler
thread that a patch of the series changes, the cases that call it at the
block / hash-block ratios users run (16 to 128), events on and off. The
export counts them on each tree it quotes (harness.workloads.call_count);
a changed function no case calls is named as not measured.
"""

from __future__ import annotations

from harness.workloads import calls, scheduler_calls
from harness.workloads.calls import EVENTS_OFF, MASKED

SCHEDULER = "vllm/v1/core/sched/scheduler.py"
BLOCK_POOL = "vllm/v1/core/block_pool.py"
CASES_BY_CALL = {
    f"{SCHEDULER}::Scheduler.update_from_output": (
        "scheduler step",
        "scheduler step" + EVENTS_OFF,
    ),
    f"{SCHEDULER}::Scheduler.reset_prefix_cache": (
        "scheduler reset",
        "scheduler reset" + EVENTS_OFF,
    ),
    f"{BLOCK_POOL}::BlockPool.cache_partial_block": (
        "partial x16",
        "partial x48",
        "partial x128",
        "register 16x1536x4000",
        "register 16x2048x4000",
        "partial x128" + EVENTS_OFF,
        "register 16x2048x4000" + EVENTS_OFF,
    ),
    f"{BLOCK_POOL}::BlockPool.cache_full_blocks": (
        *MASKED,
        "masked 64/4" + EVENTS_OFF,
    ),
}


def cases_for(changed: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the cases that measure the ``changed`` functions, once each; the
    changed functions no case calls)."""
    cases = [case for name in changed for case in CASES_BY_CALL.get(name, ())]
    unmeasured = tuple(name for name in changed if name not in CASES_BY_CALL)
    return tuple(dict.fromkeys(cases)), unmeasured


def build(case: str):
    """``(fresh, call)`` for one case: ``call(*fresh())`` makes the calls."""
    name = case.removesuffix(EVENTS_OFF)
    if name in scheduler_calls.CASES:
        return scheduler_calls.CASES[name](not case.endswith(EVENTS_OFF))
    return calls.build(case)


def note(case: str) -> str | None:
    """What a reader needs once for every case of its kind (the scheduler's
    construction), or None."""
    if case.removesuffix(EVENTS_OFF) in scheduler_calls.CASES:
        return scheduler_calls.note()
    return None


def title(case: str) -> str:
    """What the case calls, for a reader who does not know its name."""
    name = case.removesuffix(EVENTS_OFF)
    if name in scheduler_calls.CASES:
        off = ", KV events off" if case.endswith(EVENTS_OFF) else ""
        return scheduler_calls.title(name) + off
    return calls.title(case)
