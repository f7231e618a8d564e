"""The calls the export quotes (harness.workloads.calls), counted on both
trees (harness.workloads.call_count): every count repeats, so that the
export can quote it as measured, and with KV events off a patched call runs
not one Python line more than the released one."""

import pytest

from harness.workloads import call_count, calls

EVENTS_OFF = [case for case in calls.EXPORTED if case.endswith(calls.EVENTS_OFF)]


@pytest.fixture(scope="module")
def measured(conformance, tmp_path_factory):
    out = tmp_path_factory.mktemp("calls")
    return {
        name: call_count.measure(tree, calls.EXPORTED, out / f"{name}.json")
        for name, tree in conformance.trees.items()
    }


def test_every_count_repeats(measured):
    for name, figures in measured.items():
        found = {case: counts for case, counts in figures.items() if counts}
        assert found, f"no call of {calls.EXPORTED} could be made in the {name} tree"
        for case, counts in found.items():
            assert (counts["lines"] is None) == case.startswith(calls.WORKLOAD)
            for figure in ("lines", "events", "bytes"):
                first, second = counts[figure] or (None, None)
                assert first == second, (
                    f"{name}, {case}: {figure} {first} then {second}"
                )


@pytest.mark.parametrize("case", EVENTS_OFF)
def test_with_events_off_a_call_runs_no_line_more_than_released(measured, case):
    pristine, patched = measured["pristine"][case], measured["patched"][case]
    assert (pristine is None) == (patched is None), "one tree lacks the call"
    if pristine is not None:
        assert patched["lines"][0] <= pristine["lines"][0]
        assert patched["events"] == pristine["events"] == [0, 0]
