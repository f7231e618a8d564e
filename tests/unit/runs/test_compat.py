"""The drivers' bridges to older vLLM releases (0.26-0.29), on stand-ins
shaped like each release's pool and manager (no vLLM)."""

from types import SimpleNamespace

import pytest

from harness.runs.compat import (
    NO_EAGLE,
    can_replace_existing_hashes,
    is_replacement,
    pool_medium,
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
