"""The calls' cost the export quotes: measured on the pristine tree and the
branch by the function the export verb passes in, a call either tree lacks
left out, and written as counts with their ratios."""

import pytest
from support.export import export, make_target

from harness.errors import ExportError, WorkloadError
from harness.submission import call_cost
from harness.submission.call_cost import Call, CallCost, paragraph


def figures(lines, events, size, title="`f()`"):
    return {"title": title, "lines": lines, "events": events, "bytes": size}


def test_both_trees_are_measured_and_a_call_either_lacks_is_left_out(tmp_path):
    seen = []

    def measure_tree(tree, out):
        seen.append((tree.name, out.parent))
        if tree.name == "pristine":
            return {
                "kept": figures([10, 10], [1, 1], [100, 100], "kept"),
                "gone": figures([10, 10], [1, 1], [100, 100], "gone"),
                "absent": None,
            }
        return {
            "kept": figures([17, 17], [3, 3], [640, 640], "kept"),
            "gone": None,
            "absent": figures([1, 1], [0, 0], [0, 0], "absent"),
        }

    cost = call_cost.measure(
        measure_tree, tmp_path / "pristine", tmp_path / "branch", tmp_path, "vLLM x"
    )
    assert seen == [("pristine", tmp_path), ("branch", tmp_path)]
    assert cost.release == "vLLM x"
    assert [(c.title, c.pristine["lines"], c.patched["lines"]) for c in cost.calls] == [
        ("kept", [10, 10], [17, 17])
    ]


def test_a_tree_that_cannot_be_measured_ends_the_export_with_one_line(tmp_path):
    def measure_tree(tree, out):
        raise WorkloadError("measuring the calls in x: ImportError: no torch")

    with pytest.raises(ExportError, match="^cannot measure the calls' cost: .*torch$"):
        call_cost.measure(measure_tree, tmp_path, tmp_path, tmp_path, "vLLM x")


def test_the_paragraph_gives_each_count_before_and_after_with_its_ratio():
    cost = CallCost(
        "vLLM x",
        (
            Call(
                "`f()`",
                figures([135, 135], [1, 1], [210, 210]),
                figures([229, 229], [3, 3], [1343, 1343]),
            ),
            Call(
                "off",
                figures([55, 55], [0, 0], [0, 0]),
                figures([55, 56], [0, 0], [0, 0]),
            ),
            Call(
                "steps",
                figures(None, [9, 9], [90, 90]),
                figures(None, [9, 9], [99, 99]),
            ),
        ),
    )
    text = paragraph(cost)
    assert "on vLLM x as released → this branch" in text
    assert "| `f()` | 135 → 229 (1.70x) | 1 → 3 | 210 → 1,343 (6.40x) |" in text
    # two runs that differ show both counts; no ratio to nothing
    assert "| off | 55 → 55 / 56 (1.00x) | 0 → 0 | 0 → 0 |" in text
    assert "| steps | - | 9 → 9 | 90 → 99 (1.10x) |" in text  # lines not counted


def test_nothing_measured_says_nothing():
    assert paragraph(None) == ""
    assert paragraph(CallCost("vLLM x", ())) == ""


def test_the_export_quotes_the_figures_of_its_own_branch(tmp_path, monkeypatch, cache):
    """The verb measures the pristine tree and the exported branch, only
    where the fail-before-fix runs run (their Python imports the tree)."""
    make_target(tmp_path, monkeypatch)
    from harness.workloads import call_count

    measured = []

    def measure(tree, cases, out):
        measured.append(tree.name)
        lines = 100 if tree.name == "pristine" else 150
        return {cases[0]: figures([lines, lines], [1, 1], [10, 10], "`g()`")}

    monkeypatch.setattr(call_count, "measure", measure)
    quiet = tmp_path / "quiet"
    assert export(quiet) == 0
    assert (
        measured == []
        and "Cost on the scheduler thread" not in (quiet / "pr-body.md").read_text()
    )
    out = tmp_path / "out"
    assert export(out, evidence=True) == 0
    assert measured == ["pristine", "vllm"]
    assert (
        "| `g()` | 100 → 150 (1.50x) | 1 → 1 | 10 → 10 (1.00x) |"
        in (out / "pr-body.md").read_text()
    )
