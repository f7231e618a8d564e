"""A change that an open upstream pull request duplicates or competes with
is exported as a comment for that pull request, never as a pull request of
its own: which it is comes from the related-work record, and the comment
quotes what was measured at export on the release, the pull request's
design and the change, naming each consumer and the command that measured
it."""

from datetime import date

import pytest
from support.export import export, make_target
from support.trees import diff, write_tree

from harness.errors import ExportError
from harness.routers import designs
from harness.submission import related_work
from harness.submission.related_work import (
    COMPETES,
    DUPLICATES,
    NO_OPEN_PR,
    Standing,
    choose,
)
from harness.workloads import call_cases, call_count

POOL = "def capacity():\n    return 4\n"
DESIGN = diff("vllm/pool.py", POOL, POOL.replace("4", "6"))
DUPLICATE = Standing(
    DUPLICATES,
    date(2026, 12, 5),
    "a test",
    "both grow the pool",
    58121,
    "upstream-58121.patch",
)


def tally(exact, probes=10):
    return {
        "probes": probes,
        "hits": probes,
        "exact": exact,
        "over": 0,
        "over_tokens": 0,
        "under": probes - exact,
        "under_tokens": 16 * (probes - exact),
    }


def tree_figures(k1, reading_k1=None, events=100):
    def consumer(found):
        return {
            "rules": {"C1": found},
            "classes": {"K1": found, "K4": 2},
            "router": tally(10 - found),
        }

    return {
        "events": events,
        "bytes": 200 * events,
        "pristine_events_changed": 0 if k1 == 5 else 3,
        "consumers": {
            "ignoring": consumer(k1),
            "reading": consumer(k1 if reading_k1 is None else reading_k1),
        },
        "tests": None,
    }


def measured(trees, left_out=()):
    """What harness.routers.designs.at_export gives for the three trees."""
    real = [] if left_out else ["dynamo", "vllm-router"]
    rows = ["hash-set", "content-tree", designs.READING_ROUTER]
    rows += [
        f"{name}, {size} block"
        for name in ["llm-d-model", *real]
        for size in ("hash", "cache")
    ]
    return {
        "workloads": {"configs": ["a", "b"], "seeds": 1, "ops": 100, "probes": 4},
        "trees": {
            "released": tree_figures(5),
            "design": tree_figures(5, reading_k1=0, events=90),
            "change": tree_figures(0, events=110),
        },
        "matrix": {
            row: {"released": tally(6), "design": tally(7), "change": tally(9)}
            for row in rows
        },
        "real_routers": real,
        "left_out": list(left_out),
        "missing": "ai-dynamo-runtime, vllm-router" if left_out else None,
        "versions": {name: "1.0" for name in real},
    }


@pytest.fixture
def target(tmp_path, monkeypatch, cache):
    found = make_target(tmp_path, monkeypatch)
    write_tree(tmp_path / "patches" / "alternatives", {"upstream-58121.patch": DESIGN})
    monkeypatch.setattr(
        related_work,
        "STANDINGS",
        {"0001-report-the-parent.patch": DUPLICATE},
    )
    return found


@pytest.fixture
def measuring(monkeypatch):
    """The designs and the calls measured by stand-ins; what they saw."""
    seen = {}

    def at_export(trees):
        seen["trees"] = dict(trees)
        seen["design"] = (trees["design"] / "vllm" / "pool.py").read_text()
        return measured(trees, seen.get("left_out", ()))

    def measure(tree, cases, out):
        lines = {"pristine": 100, "design": 300}.get(tree.name, 150)
        return {
            case: {
                "title": "`capacity()`",
                "lines": [lines] * 2,
                "events": [1, 1],
                "bytes": [10, 10],
            }
            for case in cases
        }

    monkeypatch.setattr(designs, "at_export", at_export)
    monkeypatch.setattr(call_count, "measure", measure)
    monkeypatch.setattr(
        call_cases, "CASES_BY_CALL", {"vllm/pool.py::capacity": ("capacity",)}
    )
    return seen


def test_a_duplicate_is_a_comment_measured_beside_the_upstream_design(
    tmp_path, target, measuring, capsys
):
    out = tmp_path / "out"
    assert export(out, "--tier", "strict", "--patches", "1", evidence=True) == 0
    assert sorted(path.name for path in out.iterdir()) == ["comment-58121.md"]
    said = capsys.readouterr()
    assert "gh pr create" not in said.out and "git am" not in said.out
    assert (
        "comment: post comment-58121.md on vllm-project/vllm#58121; this change "
        "duplicates #58121 upstream, so no pull request of it is made"
    ) in said.out
    # the three trees: the release, its copy with the design applied, the branch
    trees = measuring["trees"]
    assert list(trees) == ["released", "design", "change"]
    assert trees["released"] == tmp_path / "pristine"
    assert measuring["design"] == POOL.replace("4", "6")
    comment = (out / "comment-58121.md").read_text()
    assert comment.startswith(
        "**Measurements for #58121, offered instead of a competing pull request.** "
        "The change below duplicates this pull request (both grow the pool)"
    )
    assert "`patches/alternatives/upstream-58121.patch`" in comment
    # classes per tree; the design's two consumers apart where they differ
    assert (
        "| | vLLM pristine | #58121 (re-implemented), ignoring `skipped_*` | "
        "#58121 (re-implemented), reading `skipped_*` | this change |"
    ) in comment
    assert "| K1: a partial entry's first registration" in comment
    assert "| 5 | 5 | 0 | 0 |" in comment
    assert "| events | 100 | 90 | 90 | 110 |" in comment
    # each consumer by name, with the tally of each tree
    assert "| dynamo, cache block | 6/10 · 0 (+0) · 4 (-64) | 7/10" in comment
    assert "| content-tree, reading skipped_* | " in comment
    assert "dynamo: NVIDIA Dynamo's relay and indexer (ai-dynamo-runtime) 1.0" in (
        comment
    )
    assert "Not measured:" not in comment
    # the commands that measured it
    assert (
        "python -m harness export --target t --tier strict --patches 1 --out DIR"
        in comment
    )
    assert (
        "`python benchmarks/upstream_designs.py --tree released=RELEASED --tree "
        "design=DESIGN --tree change=CHANGE --seeds 1 --ops 100 --json FILE` "
        "(the classes in its JSON)"
    ) in comment
    assert "(RELEASED: `python -m harness fetch --target t`;" in comment
    assert (
        "`python -m harness fidelity --target t --tier default --tree "
        "design=DESIGN --tree change=CHANGE --router llm-d-model --router dynamo "
        "--router vllm-router --seeds 1 --ops 100`"
    ) in comment
    # the cost of the call the change alters, on the three trees
    assert "| `capacity()` | 100 → 300 (3.00x) → 150 (1.50x) |" in comment
    assert "I, Jane Doe, reviewed it" in comment


def test_without_the_consumers_extra_the_comment_says_what_it_left_out(
    tmp_path, target, measuring, capsys
):
    measuring["left_out"] = ("dynamo", "vllm-router")
    out = tmp_path / "out"
    assert export(out, "--tier", "strict", "--patches", "1", evidence=True) == 0
    comment = (out / "comment-58121.md").read_text()
    assert (
        "Not measured: dynamo, vllm-router, whose packages (ai-dynamo-runtime, "
        "vllm-router) were not installed where this was measured."
    ) in comment
    assert "| dynamo" not in comment
    assert "--router dynamo" not in comment
    assert (
        "warning: comment-58121.md leaves out dynamo, vllm-router: "
        "ai-dynamo-runtime, vllm-router not installed in this Python (the "
        "harness's consumers extra); the comment says so"
    ) in capsys.readouterr().err


def test_at_export_measures_the_real_routers_only_where_they_are_installed(
    tmp_path, monkeypatch
):
    from harness.trees import preflight

    asked = []
    monkeypatch.setattr(
        designs,
        "side_by_side",
        lambda trees, configs, seeds, ops, probes, routers: asked.append(routers) or {},
    )
    monkeypatch.setattr(preflight, "extra", lambda name: ("the extra", "pip it"))
    found = designs.at_export({"released": tmp_path})
    assert asked == [["llm-d-model"]]
    assert found["left_out"] == ["dynamo", "vllm-router"]
    assert found["missing"] == "ai-dynamo-runtime, vllm-router"


def test_a_comment_without_measurements_quotes_no_figure(tmp_path, target, measuring):
    out = tmp_path / "out"
    assert export(out, "--tier", "strict", "--patches", "1") == 0
    comment = (out / "comment-58121.md").read_text()
    assert "Nothing was measured for this comment: no figure is quoted." in comment
    assert "|" not in comment and "trees" not in measuring


def test_a_range_whose_changes_stand_apart_is_refused_in_one_line(
    tmp_path, target, capsys
):
    code = export(tmp_path / "out", "--tier", "strict")
    assert code == ExportError.exit_code
    assert capsys.readouterr().err.splitlines()[-1] == (
        "error: --patches 1-3 of series.strict holds changes that stand apart "
        "upstream (harness/submission/related_work.py): 1 "
        "0001-report-the-parent.patch: duplicates #58121; 2 0002-add-module.patch: "
        "not recorded; 3 0003-drop-old.patch: not recorded; export a pull "
        "request of those with no open one and a comment for each open pull "
        "request apart (--patches N for each)"
    )
    assert not (tmp_path / "out").exists()
    # the changes with no open pull request are one
    assert export(tmp_path / "rest", "--tier", "strict", "--patches", "2-3") == 0
    assert (tmp_path / "rest" / "pr-body.md").exists()


class Entry:
    def __init__(self, patch):
        self.patch = patch


def test_the_record_picks_a_pull_request_or_the_open_one_to_comment_on(monkeypatch):
    competes = Standing(COMPETES, date(2026, 12, 5), "a test", "why", 44488, "x")
    free = Standing(NO_OPEN_PR, date(2026, 12, 5), "a test", "why")
    monkeypatch.setattr(
        related_work,
        "STANDINGS",
        {"a": DUPLICATE, "b": DUPLICATE, "c": competes, "d": free},
    )
    entries = [Entry(name) for name in ("a", "b", "c", "d", "e")]
    assert choose("s", entries, 1, 2) is DUPLICATE
    assert choose("s", entries, 3, 3) is competes
    assert choose("s", entries, 4, 5) is None  # none has an open pull request
    with pytest.raises(
        ExportError, match="2 b: duplicates #58121; 3 c: competes with #44488"
    ):
        choose("s", entries, 2, 3)


def test_the_series_record_makes_only_0001_a_pull_request():
    pulls = {
        patch: (found.pull_request, found.pull, found.design)
        for patch, found in related_work.STANDINGS.items()
    }
    assert pulls == {
        "0001-core-publish-prefix-cache-reset-events-at-once.patch": (
            True,
            None,
            None,
        ),
        "0002-kv-events-store-partial-entry-from-its-cache-block-start.patch": (
            False,
            58121,
            "upstream-44488-58121.patch",
        ),
        "0003-kv-events-store-block-after-skipped-blocks-with-its-span.patch": (
            False,
            44488,
            "upstream-44488.patch",
        ),
        "0004-kv-events-report-partial-entry-ancestry.patch": (
            False,
            58121,
            "upstream-44488-58121.patch",
        ),
    }


def test_a_change_no_open_pull_request_does_is_one_that_stands_alone(
    tmp_path, target, monkeypatch
):
    free = Standing(
        NO_OPEN_PR,
        date(2026, 12, 5),
        "a test",
        "no open pull request grows the pool",
        search="pool capacity",
    )
    monkeypatch.setattr(
        related_work, "STANDINGS", {"0001-report-the-parent.patch": free}
    )
    patch = tmp_path / "patches" / "0001-report-the-parent.patch"
    patch.write_text(patch.read_text().replace("Fixes #58119\n\n", ""))
    out = tmp_path / "out"
    assert export(out, "--tier", "strict", "--patches", "1") == 0
    body = (out / "pr-body.md").read_text()
    # the rest of the series goes upstream otherwise: no context for it
    assert "It applies to vLLM pristine on its own." in body
    assert "series of 3" not in body and "The series' stream replay" not in body
    assert (
        "**Duplicate-work check** (AGENTS.md), last checked 2026-12-05: no open "
        "pull request grows the pool; before opening it, `gh pr list --repo "
        'vllm-project/vllm --state open --search "pool capacity"` is run again.'
    ) in body
