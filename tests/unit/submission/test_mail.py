import json
import os
import shutil
import subprocess
import tempfile

import pytest
from support.export import (
    PATCHES,
    PERSON,
    PLACEHOLDER,
    SUBJECTS,
    SUBMITTER,
    export,
    mail,
    make_target,
    write_verdict,
)
from support.trees import diff, write_tree

from harness.errors import ExportError, OutputError, UnreadableInput
from harness.series.apply import build_patched_tree
from harness.submission import discussion, pr_body, pr_prose
from harness.verdict import Conformance

GIT_IDENTITY = ["-c", "user.name=Test", "-c", "user.email=test@example.org"]


def git(repo, *args):
    result = subprocess.run(
        ["git", *GIT_IDENTITY, *args],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_CEILING_DIRECTORIES": str(repo.parent)},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def tree_files(root):
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
        and ".git" not in path.relative_to(root).parts
        and "__pycache__" not in path.parts
    }


def patches_in(out):
    return sorted(out.glob("*.patch"))


@pytest.mark.parametrize(("tier", "count"), [("default", 2), ("strict", 3)])
def test_git_am_of_the_mails_gives_the_tree_that_apply_builds(
    tmp_path, monkeypatch, cache, tier, count
):
    target = make_target(tmp_path, monkeypatch)
    assert export(tmp_path / "mails", "--tier", tier) == 0
    mails = patches_in(tmp_path / "mails")
    assert [mail.name[:4] for mail in mails] == [f"{n:04d}" for n in range(count + 1)]

    checkout = tmp_path / "checkout"
    shutil.copytree(tmp_path / "pristine", checkout)
    git(checkout, "init", "--quiet")
    git(checkout, "add", "--all", "--force", ".")
    git(checkout, "commit", "--quiet", "-m", "pristine")
    base = git(checkout, "rev-parse", "HEAD").strip()
    git(checkout, "am", "--keep-non-patch", *map(str, mails[1:]))

    applied = build_patched_tree(target, tier, tmp_path / "applied")
    assert tree_files(checkout) == tree_files(applied)
    assert tree_files(checkout) != tree_files(tmp_path / "pristine")
    subjects = git(checkout, "log", "--reverse", "--format=%s", f"{base}..HEAD")
    assert subjects.splitlines() == SUBJECTS[:count]
    authors = git(checkout, "log", "--format=%an <%ae>", f"{base}..HEAD")
    assert authors.splitlines() == [SUBMITTER] * count


def trailers(out, number):
    text = next(out.glob(f"{number:04d}-*.patch")).read_text()
    message = text.split("\n\n", 1)[1].split("\n---\n", 1)[0]
    return message.rstrip("\n").split("\n\n")[-1].splitlines()


def test_every_mail_is_from_and_signed_off_by_the_submitter_last(
    tmp_path, monkeypatch, cache
):
    make_target(tmp_path, monkeypatch)
    out = tmp_path / "mails"
    assert export(out, "--tier", "strict") == 0
    for mail_path in patches_in(out):
        assert f"From: {SUBMITTER}\n" in mail_path.read_text()
    # The placeholder's sign-off certifies nothing: dropped, and not credited.
    assert trailers(out, 1) == [
        "Co-authored-by: Claude <noreply@anthropic.com>",
        f"Signed-off-by: {SUBMITTER}",
    ]
    assert PLACEHOLDER not in "".join(p.read_text() for p in out.iterdir())
    # A person who wrote the patch is credited, and keeps their sign-off.
    assert trailers(out, 3) == [
        "Co-authored-by: Claude <noreply@anthropic.com>",
        f"Co-authored-by: {PERSON}",
        f"Signed-off-by: {PERSON}",
        f"Signed-off-by: {SUBMITTER}",
    ]


def test_cover_letter_is_filled_with_title_series_and_verdict(
    tmp_path, monkeypatch, cache, capsys
):
    make_target(tmp_path, monkeypatch)
    conformance = Conformance(
        "passed",
        4,
        0,
        {
            "target": "t",
            "tier": "strict",
            "workloads": 24,
            "classes": {
                "K1": {"pristine": 7, "patched": 0},
                "K5": {"pristine": 2, "patched": 2},
            },
            "rules": {"C1": {"pristine": 7, "patched": 0}},
            "wire": {"byte_identical": True},
        },
    )
    write_verdict(tier="strict", conformance=conformance)
    assert export(tmp_path / "mails", "--tier", "strict") == 0
    out = capsys.readouterr().out
    assert "0000-cover-letter.patch" in out
    assert "0003-Misc-Drop-the-old-module.patch" in out
    assert "pr-body.md" in out

    letter = (tmp_path / "mails" / "0000-cover-letter.patch").read_text()
    assert "*** SUBJECT HERE ***" not in letter
    assert "*** BLURB HERE ***" not in letter
    assert (
        "Subject: [PATCH 0/3] [Bugfix][KV Events] Make the KV-cache event stream "
        "reconstructable for partial prefix-cache entries\n"
    ) in letter
    assert f"From: {SUBMITTER}\n" in letter
    assert (
        "1. [Bugfix][KV Events] Report the parent (changes upstream's "
        "`test_capacity`)\n"
    ) in letter
    assert "2. [Core] Add the ancestry module\n" in letter
    assert "3. [Misc] Drop the old module\n" in letter
    assert "| passed | 1 | 4 |\n" in letter
    assert "Regressions: 0." in letter
    assert "(passed: 4 checks passed, 0 failed)" in letter
    assert f"| {pr_prose.plain('K1')} | 7 | 0 |\n" in letter
    assert f"| {pr_prose.plain('C1')} | 7 | 0 |\n" in letter
    assert "**Each commit's tests, without and with its fix:** not run." in letter
    assert "- #58121 " in letter
    assert "I, Jane Doe, reviewed every changed line" in letter
    assert "git am --keep-non-patch" in letter
    # The letter carries the description's sections, word for word.
    body = (tmp_path / "mails" / "pr-body.md").read_text()
    for heading in ("Overview", "Claims", "Validation", "Details"):
        section = body.split(f"## {heading}\n\n", 1)[1].split("\n\n## ", 1)[0]
        section = section.split("\n\n---\n", 1)[0]
        assert f"## {heading}\n\n{section}" in letter


VERSION_FILE = (
    "__version__ = version = '0.99.1'\n"
    "__version_tuple__ = version_tuple = (0, 99, 1)\n"
    "__commit_id__ = commit_id = 'g1a2b3c4d5'\n"
)


def test_the_base_is_the_release_and_the_commit_its_version_file_records(
    tmp_path, monkeypatch, cache
):
    """The scratch commit of the pristine tree exists nowhere upstream: the
    mails and the body name the release and the commit id its sdist
    records, and carry no `base-commit:` trailer for an abbreviated id."""
    make_target(tmp_path, monkeypatch)
    write_tree(tmp_path / "pristine", {"vllm/_version.py": VERSION_FILE})
    assert export(tmp_path / "out", "--tier", "strict", "--patches", "1") == 0
    letter = (tmp_path / "out" / "0000-cover-letter.patch").read_text()
    assert "base-commit:" not in letter
    assert "to vLLM pristine (1a2b3c4d5), vLLM pristine as released" in letter
    body = (tmp_path / "out" / "pr-body.md").read_text()
    assert "Commits, against vLLM pristine (1a2b3c4d5):" in body
    assert "CPU only, on this branch (vLLM pristine (1a2b3c4d5) and these" in body


def test_missing_verdict_is_said_plainly_and_warned(
    tmp_path, monkeypatch, cache, capsys
):
    make_target(tmp_path, monkeypatch)
    write_verdict(tier="strict")  # another tier
    assert export(tmp_path / "mails") == 0
    err = capsys.readouterr().err
    assert "warning: no verdict for target t tier default" in err
    letter = (tmp_path / "mails" / "0000-cover-letter.patch").read_text()
    assert "No test run was found for this series" in letter
    assert "**vLLM's tests**" not in letter
    assert "| passed |" not in letter


@pytest.mark.hostile
def test_another_checkouts_verdict_in_the_shared_cache_is_never_quoted(
    tmp_path, monkeypatch, cache, capsys
):
    make_target(tmp_path / "one", monkeypatch)
    write_verdict()  # in checkout one's reports, of the same series
    make_target(tmp_path / "two", monkeypatch)
    assert export(tmp_path / "mails") == 0
    err = capsys.readouterr().err
    assert "warning: no verdict for target t tier default in this checkout's" in err
    assert (
        "No test run was found for this series"
        in (tmp_path / "mails" / "pr-body.md").read_text()
    )


def test_failing_verdict_is_reported_as_a_fail_with_its_reason(
    tmp_path, monkeypatch, cache, capsys
):
    make_target(tmp_path, monkeypatch)
    verdict = write_verdict(tmp_path / "v.json", patched="failed")
    assert export(tmp_path / "mails", "--verdict", str(verdict)) == 0
    assert "is a FAIL" in capsys.readouterr().err
    letter = (tmp_path / "mails" / "0000-cover-letter.patch").read_text()
    assert "FAIL):" in letter
    assert "Regressions: 1." in letter
    assert "- `tests/test_pool.py::test_capacity`: passed -> failed\n" in letter


@pytest.mark.hostile
def test_verdict_of_another_revision_of_the_series_is_warned(
    tmp_path, monkeypatch, cache, capsys
):
    make_target(tmp_path, monkeypatch)
    verdict = write_verdict(tmp_path / "v.json")
    text = verdict.read_text().replace("test_capacity_is_reported", "test_gone")
    verdict.write_text(text)
    assert export(tmp_path / "mails", "--verdict", str(verdict)) == 0
    err = capsys.readouterr().err
    assert (
        "has no outcome for tests/test_pool.py::test_capacity_is_reported (and 0 "
        "more tests the series adds): it was made for another revision"
    ) in err
    body = (tmp_path / "mails" / "pr-body.md").read_text()
    assert "made for another revision of them" in body


WHOLE = (
    '"target": "t", "tier": "default", "pristine": {"outcomes": {}}, '
    '"conformance": {"status": "passed"}, "wall_seconds": 1'
)


@pytest.mark.parametrize(
    ("verdict_text", "message"),
    [
        ("[1, 2]", "a JSON list, not an object"),
        ('{"target": "t"}', "no field 'conformance'"),
        (
            f'{{{WHOLE}, "selection": "ci", "patched": []}}',
            "a field of the wrong kind",
        ),
        (
            f'{{{WHOLE}, "selection": "nightly", "patched": {{"outcomes": {{}}}}}}',
            "selection 'nightly' is none of ci, full",
        ),
        ("{not json", "not JSON"),
        (None, "a directory, not a regular file"),
    ],
    ids=["list", "no-fields", "wrong-kind", "selection", "not-json", "directory"],
)
@pytest.mark.hostile
def test_a_verdict_that_is_not_one_is_one_line_before_any_work(
    tmp_path, monkeypatch, cache, capsys, verdict_text, message
):
    make_target(tmp_path, monkeypatch)
    verdict = tmp_path / "v.json"
    if verdict_text is None:
        verdict.mkdir()
    else:
        verdict.write_text(verdict_text)
    code = export(tmp_path / "mails", "--verdict", str(verdict))
    assert code == UnreadableInput.exit_code
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith(f"error: {verdict}: ")
    assert message in err.splitlines()[-1]
    assert len(err.splitlines()) == 2  # "submitting as", then the error
    assert "harness: copying" not in err
    assert not (tmp_path / "mails").exists()


@pytest.mark.hostile
def test_verdict_of_another_tier_is_refused(tmp_path, monkeypatch, cache, capsys):
    make_target(tmp_path, monkeypatch)
    verdict = write_verdict(tmp_path / "v.json", tier="strict")
    assert (
        export(tmp_path / "mails", "--verdict", str(verdict)) == ExportError.exit_code
    )
    err = capsys.readouterr().err
    assert "is for target t tier strict, not target t tier default" in err
    assert "Traceback" not in err
    assert not (tmp_path / "mails").exists()


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (
            mail(
                PERSON,
                "[Bugfix] Stale",
                "Does not apply.",
                diff("vllm/pool.py", "nothing like it\n", "changed\n"),
            ),
            "patch 0002-add-module.patch from",
        ),
        (
            mail(
                PERSON,
                "[Core] Unsigned",
                "No sign-off.",
                diff("vllm/ancestry.py", None, "FILLED = 1\n"),
                sign_off=False,
            ),
            "patch 0002-add-module.patch has no 'Signed-off-by: Name <email>' line",
        ),
    ],
    ids=["does-not-apply", "no-sign-off"],
)
def test_failure_leaves_no_output_behind(
    tmp_path, monkeypatch, cache, capsys, broken, message
):
    make_target(tmp_path, monkeypatch, {**PATCHES, "0002-add-module.patch": broken})
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    out = tmp_path / "out" / "mails"
    assert export(out) == ExportError.exit_code
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()  # the folder made for it went too
    assert list((tmp_path / "tmp").iterdir()) == []


def test_existing_out_directory_is_refused(tmp_path, monkeypatch, cache, capsys):
    make_target(tmp_path, monkeypatch)
    (tmp_path / "mails").mkdir()
    assert export(tmp_path / "mails") == OutputError.exit_code
    assert "already exists" in capsys.readouterr().err
    assert list((tmp_path / "mails").iterdir()) == []


@pytest.mark.hostile
def test_only_a_verdict_judged_on_this_tree_is_quoted(
    tmp_path, monkeypatch, cache, capsys
):
    """The issue's case: a shared cache held another checkout's verdict,
    another revision's; only one of this series and harness code is quoted,
    whatever else the checkout changed."""
    make_target(tmp_path, monkeypatch)
    verdict = write_verdict(tmp_path / "v.json")

    def warnings_with(change=None):
        data = json.loads(write_verdict(tmp_path / "v.json").read_text())
        if change:
            change(data)
        verdict.write_text(json.dumps(data))
        out = tmp_path / f"mails-{len(list(tmp_path.glob('mails-*')))}"
        assert export(out, "--verdict", str(verdict)) == 0
        found = [
            line
            for line in capsys.readouterr().err.splitlines()
            if "is not of this tree" in line
        ]
        # what is warned of is left out of the body
        quoted = "**vLLM's tests** (run of" in (out / "pr-body.md").read_text()
        assert quoted is not found
        return found

    def left_out(why: str) -> list[str]:
        return [
            f"warning: the verdict {verdict} is not of this tree: {why}; it is left "
            "out, and pr-body.md says there is none. Run `python -m harness test "
            "--target t --tier default` first."
        ]

    assert warnings_with() == []
    # Neither the docs nor a file of the directory that no series lists are
    # any part of what was judged.
    write_tree(tmp_path, {"README.md": "changed\n"})
    write_tree(tmp_path / "patches", {"alternatives/other.patch": "not a tier\n"})
    assert warnings_with() == []
    assert warnings_with(lambda data: data.update(provenance={})) == left_out(
        "it records no digest of its series and harness (an older verdict)"
    )

    def other_harness(data):
        data["provenance"]["harness_sha256"] = "0" * 64

    assert warnings_with(other_harness) == left_out(
        "the harness code that judged it differs from this checkout's"
    )
    taken = verdict.read_text()
    patch = tmp_path / "patches" / "0002-add-module.patch"
    patch.write_text(patch.read_text().replace("A new module.", "A module."))
    verdict.write_text(taken)
    assert export(tmp_path / "mails-last", "--verdict", str(verdict)) == 0
    assert [
        line
        for line in capsys.readouterr().err.splitlines()
        if "is not of this tree" in line
    ] == left_out("its series file or patches differ from this checkout's")


def test_a_part_of_the_series_goes_on_top_of_the_patches_before_it(
    tmp_path, monkeypatch, cache
):
    target = make_target(tmp_path, monkeypatch)
    assert export(tmp_path / "first", "--tier", "strict", "--patches", "1-2") == 0
    second = ["--tier", "strict", "--patches", "3", "--stacked"]
    assert export(tmp_path / "second", *second) == 0
    first, second = patches_in(tmp_path / "first"), patches_in(tmp_path / "second")
    assert len(first) == 3 and len(second) == 2  # with their cover letters

    body = (tmp_path / "first" / "pr-body.md").read_text()
    assert (
        "This PR holds commits 1-2 of a series of 3. A follow-up PR brings "
        "commit 3 ([Misc] Drop the old module)."
    ) in body
    body = (tmp_path / "second" / "pr-body.md").read_text()
    assert (
        "This PR holds commit 3 of a series of 3. It follows the PR of commits "
        "1-2 ([Bugfix][KV Events] Report the parent; [Core] Add the ancestry "
        "module), which must land first."
    ) in body
    assert "1. [Misc] Drop the old module\n" in body
    assert "Report the parent\n" not in body.split("Commits, against", 1)[1]

    # The follow-up names the first part's patches as its prerequisites (no
    # base-commit: the scratch commit exists nowhere upstream).
    letter = second[0].read_text()
    assert letter.count("prerequisite-patch-id: ") == 2
    assert "base-commit:" not in letter + first[0].read_text()

    # Both parts, applied in order, give the strict tree.
    checkout = tmp_path / "checkout"
    shutil.copytree(tmp_path / "pristine", checkout)
    git(checkout, "init", "--quiet")
    git(checkout, "add", "--all", "--force", ".")
    git(checkout, "commit", "--quiet", "-m", "pristine")
    git(checkout, "am", "--keep-non-patch", *map(str, first[1:] + second[1:]))
    applied = build_patched_tree(target, "strict", tmp_path / "applied")
    assert tree_files(checkout) == tree_files(applied)


def test_the_fail_before_fix_runs_are_those_of_the_part(tmp_path, monkeypatch, cache):
    make_target(tmp_path, monkeypatch)
    out = tmp_path / "out"
    assert export(out, "--tier", "strict", "--patches", "3", evidence=True) == 0
    body = (out / "pr-body.md").read_text()
    assert "<summary>1/1 [Misc] Drop the old module: 1 failing without" in body
    assert "$ git checkout --quiet --detach kv-events~1\n" in body
    assert "Report the parent:" not in body


@pytest.mark.parametrize("patches", ["2-4", "4"])
def test_a_range_outside_the_series_is_refused_before_any_work(
    tmp_path, monkeypatch, cache, capsys, patches
):
    make_target(tmp_path, monkeypatch)
    code = export(tmp_path / "out", "--tier", "strict", "--patches", patches)
    assert code == ExportError.exit_code
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == (
        f"error: --patches {patches}: series.strict lists 3 patches (1 "
        "0001-report-the-parent.patch, 2 0002-add-module.patch, 3 "
        "0003-drop-old.patch); give a range within 1-3, numbered as the series "
        "file lists them"
    )
    assert "harness: copying" not in err
    assert not (tmp_path / "out").exists()


RFC_FORM = """\
body:
- type: textarea
  attributes:
    label: Why.
- type: markdown
  attributes:
    value: not a section
- type: textarea
  attributes:
    label: What changes.
"""


@pytest.mark.parametrize("form", [None, RFC_FORM], ids=["built-in", "tree"])
def test_an_rfc_draft_comes_with_an_export_over_the_limit(
    tmp_path, monkeypatch, cache, capsys, form
):
    make_target(tmp_path, monkeypatch)
    if form:
        write_tree(tmp_path / "pristine", {".github/ISSUE_TEMPLATE/750-RFC.yml": form})
    monkeypatch.setattr(pr_body, "RFC_LINE_LIMIT", 3)
    assert export(tmp_path / "out", "--tier", "strict") == 0
    captured = capsys.readouterr()
    assert "first: open the RFC issue from rfc-issue.md" in captured.out
    assert "post rfc-issue.md first, then link it in pr-body.md" in captured.err
    rfc = (tmp_path / "out" / "rfc-issue.md").read_text()
    assert rfc.startswith("# [RFC]: Make the KV-cache event stream reconstructable")
    headings = [line for line in rfc.splitlines() if line.startswith("## ")]
    if form:
        assert headings == ["## Why", "## What changes"]
    else:
        assert headings == [f"## {name}" for name in discussion.RFC_SECTIONS]
        assert "6 changed lines outside `tests/`" in rfc
    body = (tmp_path / "out" / "pr-body.md").read_text()
    assert "over the 3 lines above which vLLM asks for an RFC issue first" in body
    assert not (tmp_path / "out" / "issue-comment.md").exists()


def comparison_results(revision):
    tree = {"events": 10, "bytes": 1000, "consumers": {}}
    return {
        "target": "t",
        "release": "vLLM t",
        "revision": revision,
        "trees": {
            "pristine": tree,
            "default": dict(tree, events=12, bytes=1150),
            "upstream": tree,
        },
    }


def test_the_comparison_is_quoted_only_where_it_measured_this_tree(
    tmp_path, monkeypatch, cache, capsys
):
    make_target(tmp_path, monkeypatch)
    write_tree(tmp_path / "patches" / "alternatives", {"up.patch": "upstream\n"})
    git(tmp_path, "init", "--quiet")
    git(tmp_path, "add", "--all", ".")
    git(tmp_path, "commit", "--quiet", "-m", "the series")
    revision = git(tmp_path, "rev-parse", "--short=7", "HEAD").strip()
    results = tmp_path / "benchmarks" / "results" / "upstream-designs.json"
    results.parent.mkdir(parents=True)
    results.write_text(json.dumps(comparison_results(revision)))
    texts = ("pr-body.md", "0000-cover-letter.patch")

    def quoted(out, *options):
        assert export(tmp_path / out, *options) == 0
        warned = [
            line
            for line in capsys.readouterr().err.splitlines()
            if "the comparison with upstream's design is left out" in line
        ]
        found = [
            "| 12 (+20.0 %) | 1150 (+15.0 %) | 96 |"
            in (tmp_path / out / name).read_text()
            for name in texts
        ]
        assert len(set(found)) == 1
        return found[0], warned

    assert quoted("same") == (True, [])
    # a part's tree is not the tier's: never quoted, nothing to warn of
    assert quoted("part", "--tier", "strict", "--patches", "1") == (False, [])
    alternative = tmp_path / "patches" / "alternatives" / "up.patch"
    alternative.write_text("upstream, revised\n")
    assert quoted("revised") == (
        False,
        [
            f"warning: benchmarks/results/upstream-designs.json was measured at "
            f"{revision}, whose benchmark, upstream's design or stream checker "
            "differ from this checkout's: the comparison with upstream's design "
            "is left out; rerun benchmarks/upstream_designs.py "
            "(docs/upstream-designs.md) to quote it"
        ],
    )
    alternative.write_text("upstream\n")
    patch = tmp_path / "patches" / "0002-add-module.patch"
    patch.write_text(patch.read_text().replace("A new module.", "A module."))
    assert quoted("changed") == (
        False,
        [
            f"warning: benchmarks/results/upstream-designs.json was measured at "
            f"{revision}, whose patches/series or its patches differ from this "
            "checkout's: the comparison with upstream's design is left out; rerun "
            "benchmarks/upstream_designs.py (docs/upstream-designs.md) to quote it"
        ],
    )
