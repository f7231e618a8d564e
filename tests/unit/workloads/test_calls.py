"""The measured calls: each case named, titled apart, and nothing measured
in a tree without vLLM's block pool."""

import pytest

from harness.workloads import call_count, calls


def test_every_exported_case_is_built_and_titled_apart():
    titles = [calls.title(case) for case in calls.EXPORTED]
    assert len(set(titles)) == len(titles)
    assert calls.title("partial x128, events off").endswith(", KV events off")
    assert "block 2048" in calls.title("register 16x2048x4000")
    assert "prefill" in calls.title("prefill 16x2048x4000")
    assert "block 2048" in calls.title("prefill 16x2048x4000")


@pytest.mark.parametrize(
    "case",
    [
        "partial",
        "decode 16k, events off",
        "prefill 16x2048x4000, events off",
        "8 tails",
    ],
)
def test_a_case_it_does_not_have_is_refused(case):
    with pytest.raises(ValueError, match="no case"):
        calls.build(case)


def test_a_tree_without_the_block_pool_has_nothing_to_measure(tmp_path):
    assert call_count.measure(tmp_path, calls.EXPORTED, tmp_path / "out.json") == {}
    assert not (tmp_path / "out.json").exists()


def test_lines_are_counted_in_the_call_and_what_it_calls():
    def inner():
        a = 1
        return a

    def outer():
        inner()
        inner()

    assert call_count.traced_lines(outer) == 2 + 2 * 2


def test_the_calls_a_change_alters_pick_their_cases_events_on_and_off():
    from harness.workloads import call_cases

    changed = [
        "vllm/v1/core/sched/scheduler.py::Scheduler.update_from_output",
        "vllm/v1/core/sched/scheduler.py::Scheduler.reset_prefix_cache",
        "vllm/v1/core/block_pool.py::BlockPool.__init__",
    ]
    cases, unmeasured = call_cases.cases_for(changed)
    assert cases == (
        "scheduler step",
        "scheduler step, events off",
        "scheduler reset",
        "scheduler reset, events off",
    )
    assert unmeasured == ("vllm/v1/core/block_pool.py::BlockPool.__init__",)
    partial, _ = call_cases.cases_for(
        ["vllm/v1/core/block_pool.py::BlockPool.cache_partial_block"]
    )
    # the block / hash-block ratios users run: 16 to 128
    assert {"partial x16", "partial x48", "partial x128"} <= set(partial)
    assert "partial x128, events off" in partial
    masked, _ = call_cases.cases_for(
        ["vllm/v1/core/block_pool.py::BlockPool.cache_full_blocks"]
    )
    assert masked == (*calls.MASKED, "masked 64/4, events off")
    assert call_cases.note("scheduler reset").startswith(
        "The scheduler's calls run on a scheduler as upstream's"
    )
    assert call_cases.note("partial x16") is None
    titles = [call_cases.title(case) for case in cases]
    assert len(set(titles)) == len(titles)
    assert titles[0].startswith("`Scheduler.update_from_output()`")
    assert titles[3].endswith(", KV events off")
    # every case a change can pick is one the builders know
    for picked in call_cases.CASES_BY_CALL.values():
        for case in picked:
            assert call_cases.title(case)


def test_the_gate_plugin_the_scheduler_cases_import_is_the_trees_one():
    from harness.trees import triton_gate
    from harness.workloads import scheduler_calls

    assert scheduler_calls.GATE_PLUGIN == triton_gate.PLUGIN
