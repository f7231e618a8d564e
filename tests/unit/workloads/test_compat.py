"""The drivers' bridges to older vLLM releases (0.24-0.29), on stand-ins
shaped like each release's pool and manager (no vLLM)."""

import sys
from types import ModuleType, SimpleNamespace

import pytest

from harness.workloads.compat import (
    NO_EAGLE,
    block_hashes_at,
    can_move_block_hashes,
    can_replace_existing_hashes,
    computed_blocks,
    fine_grained_hash_lookup,
    full_attention_hit,
    is_replacement,
    partial_hash_hits,
    pool_medium,
    pool_methods,
    release_block_copies,
    replacement,
    session,
    take_boundary_state_offloads,
)


class PoolBefore030:
    """cache_partial_block as 0.26-0.29 declare it; no medium."""

    def cache_partial_block(
        self, request, block, num_tokens, kv_cache_group_id, block_size
    ):
        raise AssertionError("never called here")


class Pool030:
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


def test_the_pool_medium_is_its_own_where_it_has_one():
    assert pool_medium(Pool030()) == "CPU"


@pytest.mark.parametrize("has_offloads", [True, False], ids=["0.29-on", "0.26-0.28"])
def test_offloads_are_taken_where_the_manager_has_them(has_offloads):
    taken = []
    manager = SimpleNamespace()
    if has_offloads:
        manager.take_boundary_state_offloads = lambda: taken.append("offloads")
    take_boundary_state_offloads(manager)
    assert taken == (["offloads"] if has_offloads else [])


def test_a_stand_in_scheduler_has_eagle_off_under_both_names():
    assert NO_EAGLE == {"use_eagle_block_drop": False, "use_eagle": False}


class RequestBefore029:
    def __init__(self, request_id, prompt_token_ids):
        pass


class Request029:
    def __init__(self, request_id, prompt_token_ids, session_id=None):
        pass


def test_a_session_is_given_only_to_requests_that_take_one():
    assert session(RequestBefore029, "s") == {}
    assert session(Request029, "s") == {"session_id": "s"}
    Request029("r", [], **session(Request029, "s"))
    RequestBefore029("r", [], **session(RequestBefore029, "s"))


class Pool026(Pool030):
    """0.26 on: cached-block events and moving a block's hashes."""

    def emit_cached_block_events(self, request, num_cached_blocks, block_size):
        raise AssertionError("never called here")

    def move_block_hashes(self, source, destination):
        raise AssertionError("never called here")


def test_only_the_methods_the_pool_has_are_wrapped():
    names = ["cache_partial_block", "emit_cached_block_events", "free_blocks"]
    assert pool_methods(Pool026(), names) == names[:2]
    assert pool_methods(PoolBefore030(), names) == ["cache_partial_block"]


def test_hashes_move_only_where_the_pool_can_move_them():
    assert can_move_block_hashes(Pool026())
    assert not can_move_block_hashes(PoolBefore030())


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


@pytest.mark.parametrize("has_copies", [True, False], ids=["0.26-on", "before-0.26"])
def test_copies_are_released_where_the_manager_makes_them(has_copies):
    freed = []
    manager = SimpleNamespace(
        block_pool=SimpleNamespace(free_blocks=lambda blocks: freed.append(blocks))
    )
    if has_copies:
        manager.take_kv_cache_block_copies = lambda: (["copied"], ["r1", "r2"])
    release_block_copies(manager)
    assert freed == ([["r1", "r2"]] if has_copies else [])


@pytest.fixture
def kv_cache_utils_before_0_26(monkeypatch):
    """A stand-in for 0.24-0.25's kv_cache_utils: no resolve_block_hashes,
    a view of the hash-block hashes at a larger block size."""

    class BlockHashListWithBlockSize:
        def __init__(self, hashes, hash_block_size, block_size):
            step = block_size // hash_block_size
            self.hashes = hashes[step - 1 :: step]

    utils = ModuleType("vllm.v1.core.kv_cache_utils")
    utils.BlockHashListWithBlockSize = BlockHashListWithBlockSize
    core = ModuleType("vllm.v1.core")
    core.kv_cache_utils = utils
    for name, module in [
        ("vllm", ModuleType("vllm")),
        ("vllm.v1", ModuleType("vllm.v1")),
        ("vllm.v1.core", core),
        ("vllm.v1.core.kv_cache_utils", utils),
    ]:
        monkeypatch.setitem(sys.modules, name, module)
    return utils


def test_hashes_at_the_block_size_are_a_view_before_0_26(kv_cache_utils_before_0_26):
    hashes = ["h2", "h4", "h6", "h8"]
    assert block_hashes_at(hashes, 2, 2) is hashes
    assert block_hashes_at(hashes, 2, 4).hashes == ["h4", "h8"]


class Manager026:
    """A single-type manager from 0.26 on: hash-block hashes in, (blocks,
    hit length) out; a partial entry can make the hit end inside a block."""

    supports_fine_grained_hash_lookup = True

    @classmethod
    def find_longest_cache_hit(cls, block_hashes, block_pool, **arguments):
        assert block_hashes == ["h2", "h4", "h6"]
        assert arguments == {"max_length": 5}
        return (["block"],), 6


class ManagerBefore026:
    """0.24-0.25: hashes at the block size in, the hit's blocks alone out."""

    @classmethod
    def find_longest_cache_hit(cls, block_hashes, block_pool, **arguments):
        assert block_hashes.hashes == ["h4"]
        assert arguments == {"max_length": 5}
        return (["block"],)


def test_a_hit_from_0_26_on_is_the_manager_s_own_length():
    pool = SimpleNamespace(hash_block_size=2)
    assert (
        full_attention_hit(Manager026, ["h2", "h4", "h6"], pool, 4, max_length=5) == 6
    )


def test_a_hit_before_0_26_is_whole_blocks(kv_cache_utils_before_0_26):
    pool = SimpleNamespace(hash_block_size=2)
    hit = full_attention_hit(
        ManagerBefore026, ["h2", "h4", "h6"], pool, 4, max_length=5
    )
    assert hit == 4


def test_a_manager_looks_hash_blocks_up_only_where_it_says_so():
    assert fine_grained_hash_lookup(Manager026)
    assert not fine_grained_hash_lookup(ManagerBefore026)
