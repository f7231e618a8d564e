"""Each patch of a tier exported as a pull request of its own: committed
onto the pristine tree alone, with its own title, text, `Fixes #` and a
Validation command that runs on its branch; no claim measured on another
tree."""

import pytest
from support.export import (
    PATCHES,
    PLACEHOLDER,
    SELECTION,
    STRICT,
    branch_from_mails,
    export,
    mail,
    make_target,
    run_validation,
    validation_command,
    write_verdict,
)
from support.export import (
    POOL as POOL_SOURCE,
)
from support.export import (
    TEST_POOL as TEST_POOL_SOURCE,
)
from support.trees import diff
from support.trees import make_target as tiny_target

from harness.errors import ExportError
from harness.submission import discussion, pr_part, pr_prose
from harness.submission.submission import Part, Submission
from harness.submission.submitter import parse_identity
from harness.targets import PathSource


@pytest.fixture
def target(tmp_path, monkeypatch, cache):
    return make_target(tmp_path, monkeypatch)


def read(out, name="pr-body.md"):
    return (out / name).read_text()


@pytest.mark.parametrize("number", [1, 2, 3])
def test_each_patch_is_its_own_pull_request_on_the_pristine_tree(
    tmp_path, target, number
):
    out = tmp_path / "out"
    assert export(out, "--tier", "strict", "--patches", str(number)) == 0
    letter = read(out, "0000-cover-letter.patch")
    assert "prerequisite-patch-id:" not in letter
    body = read(out)
    assert f"This PR holds commit {number} of a series of 3, and applies to" in body
    assert "it needs no other commit of the series" in body

    branch = branch_from_mails(tmp_path / "pristine", out, tmp_path / "branch")
    ran = run_validation(body, branch)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert " passed" in ran.stdout.splitlines()[-1]
    assert "no tests ran" not in ran.stdout


def test_a_patch_carries_its_own_title_text_and_tags(tmp_path, target, capsys):
    out = tmp_path / "out"
    assert export(out, "--tier", "strict", "--patches", "3") == 0
    said = capsys.readouterr().out
    assert "--title '[Misc] Drop the old module'" in said
    body = read(out)
    overview = body.split("## Overview", 1)[1].split("## ", 1)[0]
    assert overview.strip().startswith(
        "Fixes #58119. Optional: only in the strict tier."
    )
    assert "Report the boundary." not in body  # another patch's text
    assert "Signed-off-by:" not in overview


def test_the_validation_command_names_only_tests_of_the_branch(tmp_path, target):
    """The default tier's branch lacks the test only the strict tier adds."""
    out = tmp_path / "out"
    assert export(out) == 0
    body = read(out)
    command = validation_command(body)
    assert SELECTION[0] in command
    assert SELECTION[1] not in command
    # and each commit's own tests in files the selection does not name
    assert "tests/test_ancestry.py::test_filled" in command
    branch = branch_from_mails(tmp_path / "pristine", out, tmp_path / "branch")
    ran = run_validation(body, branch)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.splitlines()[-1].count("passed")


def test_a_part_quotes_no_run_of_the_whole_tier(tmp_path, target):
    write_verdict(tier="strict")
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert export(whole, "--tier", "strict") == 0
    assert export(part, "--tier", "strict", "--patches", "1", evidence=True) == 0
    assert "**vLLM's tests** (run of" in read(whole)
    body = read(part)
    assert "**vLLM's tests** (run of" not in body
    assert "The run below took that selection" not in body
    assert (
        "- Measured on this branch alone: each commit's own tests, without and "
        "with its fix, and vLLM's tests in the files its commits change "
        "(Validation). The series' stream replay and test run measured another "
        "tree (all its commits together) and are not quoted."
    ) in body
    assert "- The Validation command on this branch: 2 passed in " in body
    assert "**The Validation command on this branch** (run at export, CPU): " in body
    assert (
        "- [Bugfix][KV Events] Report the parent: 2 failing without the fix, "
        "all passing with it."
    ) in body
    assert "**Design.**" not in body and "**Root cause.**" not in body
    assert "- [x] **Testing and Validation:**" in body
    export(tmp_path / "unrun", "--tier", "strict", "--patches", "1")
    assert "- [ ] **Testing and Validation:**" in read(tmp_path / "unrun")


def test_a_patch_that_names_no_issue_comes_with_the_issue_it_fixes_drafted(
    tmp_path, monkeypatch, cache, capsys
):
    patches = dict(PATCHES)
    patches["0003-drop-old.patch"] = PATCHES["0003-drop-old.patch"].replace(
        "Fixes #58119\n\n", ""
    )
    make_target(tmp_path, monkeypatch, patches=patches)
    out = tmp_path / "out"
    assert export(out, "--tier", "strict", "--patches", "3", evidence=True) == 0
    assert not (out / "issue-comment.md").exists()
    body = read(out)
    assert body.split("## Overview\n\n", 1)[1].startswith("Fixes #____. ")
    assert "#58121" not in body  # the other fix of #58119 is not this one's
    said = capsys.readouterr().out
    assert (
        "first: open the issue from issue-draft.md and put its number in "
        "pr-body.md's `Fixes #____`"
    ) in said
    assert "the issue: open it from issue-draft.md" in said
    assert "the duplicate-work check of this change's own subject" in said
    draft = read(out, "issue-draft.md")
    # the sections of vLLM's bug-report form (built in: the tree has none)
    headings = [line for line in draft.splitlines() if line.startswith("#")]
    assert headings == [
        "# [Bug]: Drop the old module",
        "## Your current environment",
        "## 🐛 Describe the bug",
    ]
    assert "Reproduced on vLLM pristine, vLLM pristine as released, on CPU" in draft
    assert "Optional: only in the strict tier." in draft  # the commit's words
    assert "FAILED tests/test_old.py::test_old_module_is_gone - AssertionError" in (
        draft
    )
    assert "1 failed in " in draft
    assert "I, Jane Doe, reviewed it" in draft
    # a patch that fixes a reported issue drafts none
    fixes = tmp_path / "fixes"
    assert export(fixes, "--tier", "strict", "--patches", "1") == 0
    assert not (fixes / "issue-draft.md").exists()


NEEDS_FIRST = mail(
    "Jane Doe <jane@doe.name>",
    "[Core] Grow the pool again",
    "Builds on the first patch.",
    diff(
        "vllm/pool.py",
        "def capacity():\n    return 5\n",
        "def capacity():\n    return 6\n",
    ),
)


def test_a_patch_that_needs_an_earlier_one_is_refused_alone_in_one_line(
    tmp_path, monkeypatch, cache, capsys
):
    patches = {**PATCHES, "0004-grow.patch": NEEDS_FIRST}
    strict = STRICT + "0004-grow.patch\n"
    make_target(tmp_path, monkeypatch, patches=patches, strict=strict)
    out = tmp_path / "out"
    code = export(out, "--tier", "strict", "--patches", "4")
    assert code == ExportError.exit_code
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == (
        "error: patch 4 of series.strict (0004-grow.patch) does not apply to "
        "the pristine tree without the patches before it; export it with "
        "--stacked, on top of them"
    )
    assert "Traceback" not in err
    assert not out.exists()
    # stacked, it goes in
    assert export(out, "--tier", "strict", "--patches", "4", "--stacked") == 0
    assert "prerequisite-patch-id:" in read(out, "0000-cover-letter.patch")


def test_a_commits_message_becomes_markdown_a_reviewer_reads(tmp_path):
    message = (
        "[Core] Do it\n\nThe first line of a paragraph\nwrapped at 72 columns.\n\n"
        "  An example:\n\n  before: A\n    after: B\n\nFixes #123\n\n"
        "Co-authored-by: Claude <noreply@anthropic.com>\n"
        "Signed-off-by: Jane Doe <jane@doe.name>\n"
    )
    sub = Submission(
        target=tiny_target(PathSource(tmp_path)),
        tier="strict",
        submitter=parse_identity("Jane Doe <jane@doe.name>"),
        subjects=("[Core] Do it",),
        messages=(message,),
        tests=(),
        evidence=None,
        part=Part(2, 2, 3, ("[A] One",), ("[B] Three",), alone=True),
    )
    assert pr_part.own_text(sub) == (
        "The first line of a paragraph wrapped at 72 columns.\n\n"
        "```\nAn example:\n\nbefore: A\n  after: B\n```"
    )
    release = sub.target.source.release_name()
    assert pr_part.part_note(sub) == (
        f"This PR holds commit 2 of a series of 3, and applies to {release} "
        "on its own: it needs no other commit of the series. The series' other "
        "commits: [A] One; [B] Three."
    )
    assert sub.fixes == frozenset()  # a part claims no class of the tier's


def test_a_parts_rfc_draft_is_written_from_its_own_commits(tmp_path):
    sub = Submission(
        target=tiny_target(PathSource(tmp_path)),
        tier="strict",
        submitter=parse_identity("Jane Doe <jane@doe.name>"),
        subjects=("[Core] Do it",),
        messages=("[Core] Do it\n\nWhy it is done.\n",),
        tests=(),
        evidence=None,
        part=Part(2, 2, 3, alone=True),
        changed_lines=600,
    )
    rfc = discussion.rfc_issue(sub, discussion.RFC_SECTIONS)
    motivation = rfc.split("## Motivation", 1)[1].split("## ", 1)[0]
    assert motivation.strip() == "Why it is done."
    assert pr_prose.ROOT_CAUSE not in rfc
    assert "**Design.**" not in rfc


def test_a_part_whose_validation_fails_on_its_branch_is_warned_and_unticked(
    tmp_path, monkeypatch, cache, capsys
):
    """Its own test fails without the fix and passes with it, but the
    selection's test in the file it changes fails on its branch."""
    grown = POOL_SOURCE.replace("4", "5")
    added = TEST_POOL_SOURCE + (
        "\n\ndef test_capacity_is_reported():\n    assert capacity() > 4\n"
    )
    patches = {
        **PATCHES,
        "0001-report-the-parent.patch": mail(
            PLACEHOLDER,
            "[Bugfix] Grow the pool",
            "Grow it.",
            diff("vllm/pool.py", POOL_SOURCE, grown)
            + diff("tests/test_pool.py", TEST_POOL_SOURCE, added),
        ),
    }
    make_target(tmp_path, monkeypatch, patches)
    out = tmp_path / "out"
    code = export(out, "--patches", "1", evidence=True)
    assert code == 1
    body = read(out)
    assert "Grow the pool: 1 failing without the fix, all passing with it" in body
    assert "- The Validation command on this branch: 1 failed, 1 passed in " in body
    assert "FAILED tests/test_pool.py::test_capacity - assert 5 == 4" in body
    assert "- [ ] **Testing and Validation:**" in body
    assert (
        "warning: the Validation command did not pass on the branch: 1 failed, "
        "1 passed in "
    ) in capsys.readouterr().err
