"""When a prefix-cache reset reaches the KV-event stream (rule C9), asked
of a tree's own scheduler.

`BlockPool.reset_prefix_cache()` queues an `AllBlocksCleared`; released vLLM
publishes queued events only in `Scheduler.update_from_output()`, so on an
idle engine the reset reaches consumers with the output of the next step,
after the next request was routed. `reset_publishes_at_once` builds the
tree's `Scheduler` around a `BlockPool` (as upstream's own scheduler tests
do for methods that need no model) and says whether `reset_prefix_cache()`
itself hands the clear to the publisher. It runs inside a vLLM tree.
"""

from __future__ import annotations


class _Publisher:
    """Keeps what the scheduler publishes."""

    def __init__(self):
        self.events: list = []

    def publish(self, batch) -> None:
        self.events.extend(batch.events)


def reset_publishes_at_once() -> bool:
    from vllm.distributed.kv_events import AllBlocksCleared
    from vllm.v1.core.block_pool import BlockPool
    from vllm.v1.core.sched.scheduler import Scheduler

    scheduler = object.__new__(Scheduler)
    scheduler.running = []
    scheduler.connector = None
    scheduler.aux_output_connector = None
    scheduler.kv_cache_manager = BlockPool(
        num_gpu_blocks=2,
        enable_caching=True,
        hash_block_size=16,
        enable_kv_cache_events=True,
    )
    publisher = _Publisher()
    scheduler.kv_event_publisher = publisher
    if not scheduler.reset_prefix_cache():
        raise RuntimeError("the tree's scheduler refused to reset an empty cache")
    return any(isinstance(event, AllBlocksCleared) for event in publisher.events)
