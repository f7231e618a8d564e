"""A change that an open upstream pull request duplicates or competes with,
exported as a comment for that pull request (harness.submission.comment),
measured at export on three trees: the release, the pull request's design
as patches/alternatives/ re-implements it, and the branch with the change.

The design's tree is the pristine tree copied into the export's scratch
space and the related-work record's file of the patches directory's
`alternatives/` applied with `git apply`. With the fail-before-fix runs'
environment (vLLM's requirements), the export verb's `MeasureDesigns`
measures the three side by side (harness.routers.designs: the stream's
classes per consumer, each consumer's predictions; the real routers only
where the consumers extra is installed, and the comment says what was left
out) and the calls the change alters are counted on each
(harness.submission.call_cost). No pull-request file is written: no mails,
no body.
"""

import os
import shlex
from collections.abc import Callable
from pathlib import Path

from harness import cache, processes
from harness.errors import ExportError, OutputError
from harness.log import progress
from harness.submission import call_cost, comment
from harness.submission.commits import changed_functions
from harness.submission.gitrepo import BRANCH, git, message
from harness.submission.related_work import Standing
from harness.submission.submission import Branch, Submission

# (trees: key -> path, the release first) -> harness.routers.designs's figures
MeasureDesigns = Callable[[dict[str, Path]], dict]


def write(
    branch: Branch,
    standing: Standing,
    measure: bool,
    measure_calls: call_cost.Measurer | None,
    measure_designs: MeasureDesigns | None,
) -> tuple[dict[str, str], list[str], list[str]]:
    """The comment's file name and text, warnings, and what is left to the
    submitter."""
    repo, release = branch.repo, branch.target.source.release_name()
    labels = {
        "released": release,
        "design": f"#{standing.pull} (re-implemented)",
        "change": "this change",
    }
    warnings: list[str] = []
    design = design_tree(branch, standing) if measure else None
    trees = {"released": branch.pristine, "design": design, "change": repo}
    cost = figures = None
    if design is not None and measure_calls is not None:
        cost = call_cost.measure(
            measure_calls,
            changed_functions(repo, branch.start, BRANCH),
            {labels[key]: tree for key, tree in trees.items()},
            repo.parent,
            release,
        )
    if design is not None and measure_designs is not None:
        progress(f"measuring {', '.join(labels.values())} side by side")
        figures = measure_designs(trees)
        if figures.get("left_out"):
            warnings.append(
                f"{comment.filename(standing.pull)} leaves out "
                f"{', '.join(figures['left_out'])}: {figures['missing']} not "
                "installed in this Python (the harness's consumers extra); the "
                "comment says so"
            )
    sub = Submission(
        target=branch.target,
        tier=branch.tier,
        submitter=branch.submitter,
        subjects=tuple(_subject(repo, commit) for commit in branch.commits),
        messages=tuple(message(repo, commit) for commit in branch.commits),
        tests=(),
        evidence=None,
        part=branch.part,
        cost=cost,
        named=branch.named,
        standing=standing,
    )
    commands = measuring_commands(branch, standing, figures)
    text = comment.render(sub, labels, figures, commands)
    left = [
        f"read {comment.filename(standing.pull)} against #{standing.pull}'s "
        "current code (its design here is re-implemented from its description)"
    ]
    return {comment.filename(standing.pull): text}, warnings, left


def _subject(repo: Path, commit: str) -> str:
    return git(repo, "log", "-1", "--format=%s", commit).strip()


def design_tree(branch: Branch, standing: Standing) -> Path:
    """The pristine tree with the design's file applied, in scratch space."""
    patch = branch.series.series_file.parent / "alternatives" / str(standing.design)
    if not patch.is_file():
        raise ExportError(
            f"#{standing.pull}'s design is recorded as {patch}, which does not "
            "exist; the comment cannot measure it"
        )
    tree = branch.repo.parent / "design"
    progress(f"applying {patch.name} to a copy of the pristine tree")
    try:
        cache.copy_tree(branch.pristine, tree)
    except OSError as exc:
        raise OutputError(f"cannot copy the pristine tree to {tree}: {exc}") from None
    applied = processes.run(
        ["git", "apply", "-p1", str(patch.resolve())],
        cwd=tree,
        env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tree.parent)},
    )
    if applied.returncode != 0:
        raise ExportError(
            f"{patch} does not apply to the pristine tree: "
            f"{processes.last_words(applied)}"
        )
    return tree


def measuring_commands(
    branch: Branch, standing: Standing, figures: dict | None
) -> dict[str, str]:
    """The export command that measured the comment, and the benchmark and
    verb that measure its tables on their own."""
    target, part = branch.target, branch.part
    patches = "" if part is None else f" --patches {part.first}"
    if part is not None and part.last != part.first:
        patches += f"-{part.last}"
    workloads = (figures or {}).get("workloads", {})
    size = f"--seeds {workloads.get('seeds', 1)} --ops {workloads.get('ops', 100)}"
    routers = " ".join(
        f"--router {name}"
        for name in ("llm-d-model", *((figures or {}).get("real_routers", ())))
    )
    return {
        "export": (
            f"python -m harness export --target {target.name} --tier "
            f"{branch.tier}{patches} --out DIR --as {shlex.quote('NAME <EMAIL>')} "
            "--i-reviewed-every-line"
        ),
        "released": f"python -m harness fetch --target {target.name}",
        "classes": (
            "python benchmarks/upstream_designs.py --tree released=RELEASED "
            f"--tree design=DESIGN --tree change=CHANGE {size} --json FILE"
        ),
        "consumers": (
            f"python -m harness fidelity --target {target.name} --tier default "
            f"--tree design=DESIGN --tree change=CHANGE {routers} {size}"
        ),
    }
