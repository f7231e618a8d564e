"""Two calls of vLLM's `Scheduler`, for what a change to them costs on the
scheduler thread (harness.workloads.calls names them, call_count counts
them): ``scheduler step``, one `update_from_output()` of a prompt's first
step, and ``scheduler reset``, one `reset_prefix_cache()` after a finished
request, each ``, events off`` too.

The scheduler is built as upstream's own tests build it: the tree's
tests/v1/core/utils.py `create_scheduler` (prefix caching on, block 16,
facebook/opt-125m's config from the harness's offline hub stand-in,
harness/trees/env.py), its `VllmConfig` given a `KVEventsConfig` where
events are on. vLLM 0.34's CPU platform refuses that config on an x86 CPU
without triton-cpu: where the tree has that gate, this process lifts it as
the upstream tests' runs do (harness_triton_gate). What the scheduler
publishes is kept by a publisher in place of its own (as
harness.workloads.reset_probe does), so a case counts the events the call
publishes, not those it queues. vLLM is imported only inside the functions.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from pathlib import Path

PROMPT_TOKENS = 64
# harness.trees.triton_gate.PLUGIN, the module whose import lifts the gate.
GATE_PLUGIN = "harness_triton_gate"


class Published:
    """The batches the scheduler publishes, as call_count takes them."""

    def __init__(self):
        self.batches: list[list] = []

    def publish(self, batch) -> None:
        self.batches.append(list(batch.events))

    def shutdown(self) -> None:
        pass

    def take_batches(self) -> list[list]:
        batches, self.batches = self.batches, []
        return batches


def lift_triton_gate() -> None:
    """Lift vLLM 0.34's Triton gate in this process where the tree vLLM
    is imported from has it (harness.trees.triton_gate)."""
    import vllm

    from harness.trees import triton_gate

    tree = Path(vllm.__file__).resolve().parents[1]
    if triton_gate.state(tree) == triton_gate.BYPASSED:
        importlib.import_module(f"harness.trees.pytest_plugins.{GATE_PLUGIN}")


def new_scheduler(events: bool):
    """A scheduler as upstream's tests build it, publishing to `Published`;
    ``Unsupported`` where the tree has no `create_scheduler` to build it."""
    from harness.workloads.calls import Unsupported

    lift_triton_gate()
    try:
        from tests.v1.core import utils
    except ImportError as exc:
        raise Unsupported(f"the tree's tests/v1/core/utils.py: {exc}") from None
    from vllm.config import KVEventsConfig

    released = utils.VllmConfig

    def with_events(**kwargs):
        kwargs["kv_events_config"] = KVEventsConfig(
            enable_kv_cache_events=True, publisher="null"
        )
        return released(**kwargs)

    utils.VllmConfig = with_events if events else released
    try:
        scheduler = utils.create_scheduler(enable_prefix_caching=True)
    finally:
        utils.VllmConfig = released
    published = Published()
    scheduler.kv_event_publisher = published
    return scheduler, published, utils


def runner_output(request_id: str):
    """One sampled token for the request, as the model runner reports it."""
    from vllm.v1.outputs import ModelRunnerOutput

    given = {
        "req_ids": [request_id],
        "req_id_to_index": {request_id: 0},
        "sampled_token_ids": [[0]],
        "logprobs": None,
        "prompt_logprobs_dict": {},
        "pooler_output": [],
    }
    names = {field.name for field in dataclasses.fields(ModelRunnerOutput)}
    return ModelRunnerOutput(**{k: v for k, v in given.items() if k in names})


def first_step(events: bool):
    """``(fresh, call)``: a scheduler that scheduled a prompt's first step,
    and the step's `update_from_output()`."""

    def fresh():
        scheduler, published, utils = new_scheduler(events)
        request = utils.create_requests(num_requests=1, num_tokens=PROMPT_TOKENS)[0]
        scheduler.add_request(request)
        output = scheduler.schedule()
        return published, scheduler, output, runner_output(request.request_id)

    def call(published, scheduler, output, model_output) -> None:
        scheduler.update_from_output(output, model_output)

    return fresh, call


def reset_after_request(events: bool):
    """``(fresh, call)``: a scheduler whose only request ran a step and was
    aborted, its blocks cached and its step's events published, and the
    `reset_prefix_cache()` that clears them."""

    def fresh():
        from vllm.v1.request import RequestStatus

        published, scheduler, output, model_output = first_step(events)[0]()
        scheduler.update_from_output(output, model_output)
        request_id = model_output.req_ids[0]
        scheduler.finish_requests(request_id, RequestStatus.FINISHED_ABORTED)
        published.take_batches()
        return published, scheduler

    def call(published, scheduler) -> None:
        if not scheduler.reset_prefix_cache():
            raise RuntimeError("the scheduler refused to reset its prefix cache")

    return fresh, call


CASES = {"scheduler step": first_step, "scheduler reset": reset_after_request}


def title(name: str) -> str:
    """What the case calls, for a reader who does not know its name."""
    if name == "scheduler step":
        return (
            f"`Scheduler.update_from_output()` of a {PROMPT_TOKENS}-token "
            "prompt's first step"
        )
    return (
        "`Scheduler.reset_prefix_cache()` after a finished request (the "
        "events it publishes)"
    )


def note() -> str:
    """How the scheduler of every case was built, said once beside them (in
    the process that measured them: whether it lifted the Triton gate)."""
    lifted = (
        "; vLLM 0.34's Triton gate lifted in the measuring process, as in the test runs"
        if f"harness.trees.pytest_plugins.{GATE_PLUGIN}" in sys.modules
        else ""
    )
    return (
        "The scheduler's calls run on a scheduler as upstream's "
        "tests/v1/core/utils.py `create_scheduler()` builds one (prefix "
        "caching on, block 16, its default number of blocks, "
        f"which the pool's reset walks one by one{lifted}); the events are those "
        "the call publishes, and the release publishes a reset's with the next "
        "step's output"
    )
