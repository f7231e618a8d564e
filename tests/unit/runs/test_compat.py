"""The drivers' bridges to older vLLM releases, on stand-ins shaped like each
release's pool and manager (no vLLM)."""

from types import SimpleNamespace

import pytest

from harness.runs.compat import (
    NO_EAGLE,
    can_replace_existing_hashes,
    computed_blocks,
    end_step,
    is_replacement,
    partial_hash_hits,
    pool_medium,
    pool_methods,
    replacement,
)


class PoolBefore030:
    """cache_partial_block as 0.24-0.29 declare it; no medium."""

    def __init__(self):
        self.freed = []

    def cache_partial_block(
        self, request, block, num_tokens, kv_cache_group_id, block_size
    ):
        raise AssertionError("never called here")

    def free_blocks(self, blocks):
        self.freed.append(list(blocks))


class Pool030(PoolBefore030):
    """0.30 on: a medium, and in-place replacement."""

    medium = "CPU"

    def cache_partial_block(
        self,
        request,
        block,
        num_tokens,
        kv_cache_group_id,
        block_size,
        replace_existing_hashes=False,
    ):
        raise AssertionError("never called here")

    def emit_cached_block_events(self, request, num_cached_blocks, block_size):
        raise AssertionError("never called here")


def test_replacement_is_asked_for_only_where_the_release_has_it():
    assert can_replace_existing_hashes(Pool030())
    assert replacement(Pool030(), True) == {"replace_existing_hashes": True}
    assert replacement(Pool030(), False) == {}
    assert not can_replace_existing_hashes(PoolBefore030())
    # Before 0.30 the re-keying is the release's promotion: no flag.
    assert replacement(PoolBefore030(), True) == {}


def test_bound_arguments_without_the_flag_are_no_replacement():
    assert is_replacement({"num_tokens": 16, "replace_existing_hashes": True})
    assert not is_replacement({"num_tokens": 16, "replace_existing_hashes": False})
    assert not is_replacement({"num_tokens": 16})


def test_only_the_methods_the_pool_has_are_wrapped():
    names = ["cache_partial_block", "emit_cached_block_events", "free_blocks"]
    assert pool_methods(Pool030(), names) == names
    assert pool_methods(PoolBefore030(), names) == [
        "cache_partial_block",
        "free_blocks",
    ]


def test_the_pool_medium_is_its_own_where_it_has_one():
    assert pool_medium(Pool030()) == "CPU"


@pytest.mark.parametrize(
    ("coordinator", "expected"),
    [
        (SimpleNamespace(enable_partial_hash_hits=True), True),
        (SimpleNamespace(enable_partial_hash_hits=False), False),
        (SimpleNamespace(), False),  # before 0.26
    ],
)
def test_partial_hash_hits_are_off_before_0_26(coordinator, expected):
    assert partial_hash_hits(SimpleNamespace(coordinator=coordinator)) is expected


@pytest.mark.parametrize("result", [("blocks", 12), ("blocks", 12, 8)])
def test_computed_blocks_take_the_hit_with_or_without_the_boundary(result):
    manager = SimpleNamespace(get_computed_blocks=lambda request: result)
    assert computed_blocks(manager, "request") == ("blocks", 12)


class Manager:
    def __init__(self, pool, *, copies: bool, offloads: bool):
        self.block_pool = pool
        self.calls = []
        if copies:
            self.take_kv_cache_block_copies = self._copies
        if offloads:
            self.take_boundary_state_offloads = self._offloads

    def _copies(self):
        self.calls.append("copies")
        return ["copied"], ["retained-1", "retained-2"]

    def _offloads(self):
        self.calls.append("offloads")

    def take_new_block_ids(self):
        self.calls.append("new block ids")


@pytest.mark.parametrize(
    ("copies", "offloads", "calls", "freed"),
    [
        (
            True,
            True,
            ["copies", "new block ids", "offloads"],
            [["retained-1", "retained-2"]],
        ),
        (True, False, ["copies", "new block ids"], [["retained-1", "retained-2"]]),
        (False, False, ["new block ids"], []),
    ],
    ids=["0.29-on", "0.26-0.28", "before-0.26"],
)
def test_a_step_ends_as_the_release_scheduler_ends_it(copies, offloads, calls, freed):
    pool = PoolBefore030()
    manager = Manager(pool, copies=copies, offloads=offloads)
    end_step(manager)
    assert manager.calls == calls
    assert pool.freed == freed


def test_a_stand_in_scheduler_has_eagle_off_under_both_names():
    assert NO_EAGLE == {"use_eagle_block_drop": False, "use_eagle": False}
