"""The Dynamo relay adapter's own parts that need no Dynamo: its settle
sentinel and its model directory (tests/consumers runs the relay itself)."""

import os
import subprocess
import sys
from pathlib import Path

from support.events import removed, stored

from harness.contract.wire import BlockStored
from harness.routers.dynamo_relay import (
    model_directory,
    sentinel_removal,
    sentinel_store,
)

MAIN_ATTENTION = {"full_attention", "mla_attention", "sink_full_attention"}


class RelayGroups:
    """Dynamo 1.6.1's relay filter (lib/kv-router/src/zmq_wire, mod.rs
    `preprocess_with_reason`, `learn_metadata`, `filter_reason`): a store
    teaches the relay its group's kind; an event with a kind passes if it
    is main attention; one without (a removal) by its group's learned kind,
    an unlearned group passing only if it is group 0."""

    def __init__(self):
        self.kinds = {}

    def forwards(self, event) -> bool:
        kind = getattr(event, "kv_cache_spec_kind", None)
        if isinstance(event, BlockStored) and kind and event.group_idx is not None:
            self.kinds[event.group_idx] = kind
        if kind is not None:
            return kind in MAIN_ATTENTION
        if event.group_idx is None:
            return True
        if event.group_idx in self.kinds:
            return self.kinds[event.group_idx] in MAIN_ATTENTION
        return event.group_idx == 0


def test_the_sentinel_teaches_the_relay_nothing_of_the_engines_groups():
    relay = RelayGroups()
    assert not relay.forwards(stored([1], None, group=0, kind="mamba"))
    assert relay.forwards(sentinel_store(16))
    assert relay.forwards(sentinel_removal())
    # Group 0 is still Mamba to the relay: its removal stays out of the index.
    assert not relay.forwards(removed([1], group=0))


def test_the_sentinel_is_one_block_at_the_routers_block_size():
    store = sentinel_store(16)
    assert (len(store.token_ids), store.block_size, store.parent_block_hash) == (
        16,
        16,
        None,
    )
    assert sentinel_removal().block_hashes == store.block_hashes


def test_the_model_directory_goes_when_the_process_ends():
    made = subprocess.run(
        [sys.executable, "-c", _PRINT_IT],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)},
    )
    path = Path(made.stdout.strip())
    assert path.name.startswith(".harness-scratch-dynamo-model-")
    assert not path.exists()


def test_a_killed_runs_model_directory_is_swept_by_the_next():
    killed = subprocess.run(
        [sys.executable, "-c", _PRINT_IT + "; import os; os.kill(os.getpid(), 9)"],
        capture_output=True,
        text=True,
        env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)},
    )
    left = Path(killed.stdout.strip())
    assert killed.returncode == -9 and left.is_dir()
    mine = Path(model_directory())
    assert mine.is_dir() and not left.exists()


_PRINT_IT = (
    "from harness.routers.dynamo_relay import model_directory; "
    "print(model_directory(), flush=True)"
)
