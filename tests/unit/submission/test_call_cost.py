"""The calls' cost the export quotes: the cases of the functions the change
alters, measured on every tree it quotes by what the export verb passes in,
a call some tree lacks left out, written as counts with their ratios, and
the benchmark that times them named."""

import pytest
from support.export import export, make_target

from harness.errors import ExportError, WorkloadError
from harness.submission import call_cost
from harness.submission.call_cost import Call, CallCost, Measurer, paragraph


def figures(lines, events, size, title="`f()`"):
    return {"title": title, "lines": lines, "events": events, "bytes": size}


def cases_for(changed):
    cases = ("kept", "gone", "absent") if "x.py::f" in changed else ()
    return cases, tuple(name for name in changed if name != "x.py::f")


def test_every_tree_is_measured_and_a_call_one_lacks_is_left_out(tmp_path):
    seen = []

    def measure_tree(tree, cases, out):
        seen.append((tree.name, cases, out.parent))
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

    trees = {"vLLM x": tmp_path / "pristine", "this branch": tmp_path / "branch"}
    measurer = Measurer(cases_for, measure_tree)
    cost = call_cost.measure(
        measurer, ["x.py::f", "x.py::C.g"], trees, tmp_path, "vLLM x"
    )
    cases = ("kept", "gone", "absent")
    assert seen == [("pristine", cases, tmp_path), ("branch", cases, tmp_path)]
    assert cost.release == "vLLM x" and cost.trees == ("vLLM x", "this branch")
    assert cost.unmeasured == ("x.py::C.g",)
    found = [(c.title, [tree["lines"] for tree in c.figures]) for c in cost.calls]
    assert found == [("kept", [[10, 10], [17, 17]])]
    # a change whose functions no case calls is measured in no tree
    seen.clear()
    cost = call_cost.measure(measurer, ["x.py::C.g"], trees, tmp_path, "vLLM x")
    assert seen == [] and cost.calls == ()
    assert "no case of the submitter's harness measures it" in paragraph(cost)


def test_a_tree_that_cannot_be_measured_ends_the_export_with_one_line(tmp_path):
    def measure_tree(tree, cases, out):
        raise WorkloadError("measuring the calls in x: ImportError: no torch")

    with pytest.raises(ExportError, match="^cannot measure the calls' cost: .*torch$"):
        call_cost.measure(
            Measurer(cases_for, measure_tree),
            ["x.py::f"],
            {"a": tmp_path, "b": tmp_path},
            tmp_path,
            "vLLM x",
        )


def test_the_paragraph_gives_each_count_on_each_tree_with_its_ratio():
    cost = CallCost(
        "vLLM x",
        ("vLLM x", "this branch"),
        ("x.py::C.f", "x.py::C.g"),
        ("x.py::C.g",),
        (
            Call(
                "f",
                "`f()`",
                (
                    figures([135, 135], [1, 1], [210, 210]),
                    figures([229, 229], [3, 3], [1343, 1343]),
                ),
            ),
            Call(
                "f, events off",
                "off",
                (figures([55, 55], [0, 0], [0, 0]), figures([55, 56], [0, 0], [0, 0])),
            ),
            Call(
                "steps",
                "steps",
                (figures(None, [9, 9], [90, 90]), figures(None, [9, 9], [99, 99])),
                "Steps run in a pool",
            ),
            Call(
                "steps, events off",
                "steps off",
                (figures(None, [0, 0], [0, 0]), figures(None, [0, 0], [0, 0])),
                "Steps run in a pool",
            ),
        ),
    )
    text = paragraph(cost)
    assert "of the calls the change alters (`C.f`, `C.g`)" in text
    assert "measured at export (vLLM x → this branch)" in text
    assert "| `f()` | 135 → 229 (1.70x) | 1 → 3 | 210 → 1,343 (6.40x) |" in text
    # two runs that differ show both counts; no ratio to nothing
    assert "| off | 55 → 55 / 56 (1.00x) | 0 → 0 | 0 → 0 |" in text
    assert "| steps | - | 9 → 9 | 90 → 99 (1.10x) |" in text  # lines not counted
    assert text.count("Steps run in a pool.") == 1  # a note said once
    assert (
        "`python benchmarks/partial_entry_cost.py --tree released=RELEASED "
        "--tree change=CHANGE --case f --case 'f, events off' --case steps "
        "--case 'steps, events off'` times "
        "the same calls in interleaved rounds (RELEASED: vLLM x, CHANGE: this "
        "branch)."
    ) in text
    assert "Also changed, and called directly by no case above: `C.g`." in text


def test_a_third_tree_is_a_column_with_its_ratio_to_the_release():
    cost = CallCost(
        "vLLM x",
        ("vLLM x", "#1 (re-implemented)", "this change"),
        ("x.py::f",),
        (),
        (
            Call(
                "f",
                "`f()`",
                (
                    figures([100, 100], [1, 1], [10, 10]),
                    figures([300, 300], [1, 1], [30, 30]),
                    figures([150, 150], [2, 2], [20, 20]),
                ),
            ),
        ),
    )
    text = paragraph(cost)
    assert "| `f()` | 100 → 300 (3.00x) → 150 (1.50x) | 1 → 1 → 2 |" in text
    assert "--tree design=DESIGN" in text
    assert "DESIGN: #1 (re-implemented)" in text


def test_a_partial_entrys_growth_with_the_block_ratio_is_said_per_tree():
    def call(ratio, lines):
        return Call(
            f"partial x{ratio}",
            f"x{ratio}",
            tuple(figures([n, n], [1, 1], [9, 9]) for n in lines),
        )

    cost = CallCost(
        "vLLM x",
        ("vLLM x", "this branch"),
        ("p.py::Pool.cache_partial_block",),
        (),
        (call(16, (124, 300)), call(128, (124, 2000))),
    )
    assert (
        "Per `cache_partial_block()` call, with events on, at block / hash "
        "block 16, 128: Python lines vLLM x 124, 124; this branch 300, 2,000; "
        "bytes vLLM x 9, 9; this branch 9, 9."
    ) in paragraph(cost)


def test_nothing_measured_says_nothing():
    assert paragraph(None) == ""
    assert paragraph(CallCost("vLLM x", ("vLLM x", "b"), (), (), ())) == ""


def test_the_export_quotes_the_figures_of_its_own_branch(tmp_path, monkeypatch, cache):
    """The verb measures the pristine tree and the exported branch, in the
    cases of the functions the change alters, only where the fail-before-fix
    runs run (their Python imports the tree)."""
    make_target(tmp_path, monkeypatch)
    from harness.workloads import call_cases, call_count

    monkeypatch.setattr(
        call_cases, "CASES_BY_CALL", {"vllm/pool.py::capacity": ("capacity",)}
    )
    measured = []

    def measure(tree, cases, out):
        measured.append((tree.name, cases))
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
    assert measured == [("pristine", ("capacity",)), ("vllm", ("capacity",))]
    body = (out / "pr-body.md").read_text()
    assert "| `g()` | 100 → 150 (1.50x) | 1 → 1 | 10 → 10 (1.00x) |" in body
    assert "of the calls the change alters (`capacity`)" in body
