import shutil

import pytest
from support.trees import (
    diff,
    make_sdist,
    sha256_of,
    target_table,
    write_pins,
    write_tree,
)

from harness import checkout, cli
from harness.errors import TargetError
from harness.series import lint as serieslint
from harness.targets import load_targets

SHA = "ab" * 32
SOURCE = f'{{ sdist = "vllm==0.33.0", sha256 = "{SHA}" }}'
POOL = "import os\n\ny = ( 1 )\n\n\ndef size():\n    return 1\n"
RUFF_CONFIG = '[tool.ruff]\nline-length = 88\n\n[tool.ruff.lint]\nselect = ["F"]\n'
PRISTINE = {
    "pyproject.toml": RUFF_CONFIG,
    "pkg/__init__.py": "",
    "pkg/pool.py": POOL,
}
AUTHOR = "Ada Lovelace <ada@example.org>"


def mail(subject: str, diff_text: str, sign_off: bool = True) -> str:
    trailer = f"Signed-off-by: {AUTHOR}\n" if sign_off else ""
    return (
        f"From: {AUTHOR}\nDate: Mon, 30 Nov 2026 01:28:02 +0000\n"
        f"Subject: {subject}\n\nWhy it changes.\n\n{trailer}---\n{diff_text}"
    )


GOOD = {
    "0001-size.patch": mail(
        "[Bugfix][KV Events] Return the real size",
        diff("pkg/pool.py", POOL, POOL.replace("return 1", "return 2")),
    ),
    "0002-notes.patch": mail(
        "[Misc] Add notes", diff("NOTES.md", None, "notes\n  with context\n")
    ),
}
SERIES = "0001-size.patch\n0002-notes.patch\n"


def make_repo(tmp_path, patches=None, series=SERIES, strict=None, extra_target=""):
    """A repository root with target t (patches/) and its series files."""
    root = tmp_path / "repo"
    patches_dir = write_tree(root / "patches", GOOD if patches is None else patches)
    (patches_dir / "series").write_text(series)
    if strict is not None:
        (patches_dir / "series.strict").write_text(strict)
    write_pins(root, target_table(SOURCE) + extra_target)
    return root


def test_clean_series_passes_and_says_what_it_skipped(tmp_path, cache, capsys):
    root = make_repo(tmp_path, strict=SERIES)
    assert cli.main(["lint", "--root", str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == (
        "serieslint: OK, 2 patch file(s) checked, 0 series applied without fuzz, "
        "0 run through ruff; 2 series not applied for want of a pristine tree "
        "(patches/series, patches/series.strict)"
    )
    assert (
        "serieslint: patches/series: no-fuzz apply check and ruff skipped: no "
        "pristine tree of target(s) t in the cache (`python -m harness fetch "
        "--target T` caches one)"
    ) in out


def test_project_series_pass_the_lint(cache):
    findings = serieslint.lint(checkout.root())
    assert findings.errors == []
    assert findings.patches >= 3


def test_patch_without_sign_off_is_named(tmp_path, cache, capsys):
    patches = {
        **GOOD,
        "0002-notes.patch": mail(
            "[Misc] Add notes", diff("NOTES.md", None, "notes\n"), sign_off=False
        ),
    }
    root = make_repo(tmp_path, patches)
    assert cli.main(["lint", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert (
        "patches/0002-notes.patch: no 'Signed-off-by: Name <email>' line before "
        "the diff"
    ) in out
    assert "serieslint: 1 error(s)" in out


def test_orphan_patch_is_named(tmp_path, cache, capsys):
    root = make_repo(tmp_path, series="0001-size.patch\n", strict="0001-size.patch\n")
    assert cli.main(["lint", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert (
        "patches/0002-notes.patch: not listed in any series file of patches/ "
        "(series, series.strict)"
    ) in out


def test_patch_listed_only_in_the_strict_series_is_not_an_orphan(tmp_path, cache):
    root = make_repo(tmp_path, series="0001-size.patch\n", strict=SERIES)
    assert serieslint.lint(root).errors == []


def test_series_naming_a_missing_patch_is_named_with_its_line(tmp_path, cache):
    root = make_repo(tmp_path, strict=SERIES + "# optional\n0003-ghost.patch\n")
    assert serieslint.lint(root).errors == [
        "patches/series.strict:4: names 0003-ghost.patch, which does not exist"
    ]


def test_missing_series_file_is_a_note_not_an_error(tmp_path, cache):
    findings = serieslint.lint(make_repo(tmp_path))
    assert findings.errors == []
    assert "patches/series.strict does not exist yet" in findings.notes


def test_backport_directory_is_checked_too(tmp_path, cache):
    backport = target_table(SOURCE, patches="patches/v0.32").replace(
        "[targets.t]", '[targets."0.32"]'
    )
    root = make_repo(tmp_path, extra_target=backport)
    write_tree(root / "patches" / "v0.32", {"series": "", "stray.patch": ""})
    assert serieslint.lint(root).errors == [
        "patches/v0.32/series: lists no patch",
        "patches/v0.32/stray.patch: not listed in any series file of "
        "patches/v0.32/ (series, series.strict)",
    ]


NOTES = diff("NOTES.md", None, "notes\n")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            mail("[Misc] Notes", NOTES).replace(f"From: {AUTHOR}\n", ""),
            "patches/0002-notes.patch:1: no 'From: Name <email>' header",
        ),
        (
            mail("[Misc] Notes", NOTES).replace(f"From: {AUTHOR}", "From: ada"),
            "patches/0002-notes.patch:1: From: 'ada' is not 'Name <email>'",
        ),
        (
            mail("[Misc] Notes", NOTES).replace("Mon, 30 Nov 2026", "yesterday"),
            "patches/0002-notes.patch:2: Date: 'yesterday 01:28:02 +0000' is not",
        ),
        (
            mail("Add notes", NOTES),
            "patches/0002-notes.patch:3: the subject 'Add notes' does not start "
            "with an upstream tag",
        ),
        (
            mail("[PATCH] Add notes", NOTES),
            "patches/0002-notes.patch:3: the subject '[PATCH] Add notes' does not",
        ),
    ],
    ids=["no-from", "from-without-email", "bad-date", "untagged", "only-patch-tag"],
)
def test_mail_header_defects_are_named_with_their_line(tmp_path, cache, text, expected):
    root = make_repo(tmp_path, {**GOOD, "0002-notes.patch": text})
    errors = serieslint.lint(root).errors
    assert len(errors) == 1, errors
    assert errors[0].startswith(expected)


ADDED = "notes\n"


@pytest.mark.parametrize(
    ("diff_text", "expected"),
    [
        (
            "Index: NOTES.md\n" + "=" * 67 + "\n" + NOTES,
            "patches/0002-notes.patch:9: an Index: line",
        ),
        (
            "diff --git a/NOTES.md b/NOTES.md\nnew file mode 100644\n"
            "index 0000000..1111111\n" + NOTES,
            "patches/0002-notes.patch:9: a 'diff' line (git's form)",
        ),
        (
            NOTES.replace("+++ b/NOTES.md", "+++ b/NOTES.md\t2026-11-30 01:28:02"),
            "patches/0002-notes.patch:10: a timestamp on the '+++' line",
        ),
        (
            NOTES.replace("+++ b/NOTES.md", "+++ NOTES.md"),
            "patches/0002-notes.patch:10: '+++ NOTES.md' does not start with '+++ b/'",
        ),
        (
            NOTES.replace("+notes\n", "+notes \n"),
            "patches/0002-notes.patch:12: trailing whitespace on an added line",
        ),
        (
            NOTES.replace("@@ -0,0 +1 @@", "@@ -0,0 +1,3 @@"),
            "patches/0002-notes.patch:12: the last hunk is cut short",
        ),
        ("", "patches/0002-notes.patch: no diff in the patch"),
    ],
    ids=[
        "index-line",
        "git-diff-form",
        "timestamp",
        "no-b-prefix",
        "trailing-whitespace",
        "short-hunk",
        "no-diff",
    ],
)
def test_diff_form_defects_are_named_with_their_line(
    tmp_path, cache, diff_text, expected
):
    root = make_repo(
        tmp_path, {**GOOD, "0002-notes.patch": mail("[Misc] N", diff_text)}
    )
    errors = serieslint.lint(root).errors
    assert errors, "the defect was not found"
    assert errors[0].startswith(expected), errors


def test_whitespace_on_context_and_removed_lines_is_left_alone(tmp_path, cache):
    old = "a \nb\nc\n"
    edit = diff("NOTES.md", old, "a \nB\nc\n") + diff("OLD.md", "gone \n", None)
    root = make_repo(tmp_path, {**GOOD, "0002-notes.patch": mail("[Misc] N", edit)})
    assert serieslint.lint(root).errors == []


def cached_pristine_tree(root, cache):
    target = load_targets(root / "harness" / "targets.toml")["t"]
    return write_tree(cache / "trees" / target.source.identity(), PRISTINE)


@pytest.mark.requires_ruff
def test_ruff_reports_only_what_the_series_introduces(tmp_path, cache):
    patched = POOL.replace("import os\n", "import os\nimport sys\n") + "\n\nx = {  }\n"
    patches = {
        "0001-size.patch": mail("[Perf] Size", diff("pkg/pool.py", POOL, patched))
    }
    root = make_repo(tmp_path, patches, series="0001-size.patch\n")
    cached_pristine_tree(root, cache)
    findings = serieslint.lint(root)
    # `import os` and `y = ( 1 )` were there before the series: not reported.
    assert findings.errors == [
        "patches/series: pkg/pool.py:2:8: F401 [*] `sys` imported but unused "
        "(ruff check under vLLM's configuration, after 0001-size.patch)",
        "patches/series: pkg/pool.py:11: would change 'x = {  }' "
        "(ruff format under vLLM's configuration, after 0001-size.patch)",
    ]
    assert findings.ruff_runs == 1
    assert not any("ruff skipped" in note for note in findings.notes)


@pytest.mark.requires_ruff
def test_ruff_uses_the_trees_own_configuration(tmp_path, cache):
    long_line = "z = " + " + ".join(["1"] * 40) + "\n"
    patch = mail("[Misc] Long", diff("pkg/long.py", None, long_line))
    root = make_repo(tmp_path, {"0001-long.patch": patch}, series="0001-long.patch\n")
    tree = cached_pristine_tree(root, cache)
    config = '[tool.ruff]\nline-length = {}\n\n[tool.ruff.lint]\nselect = ["E501"]\n'
    (tree / "pyproject.toml").write_text(config.format(88))
    errors = serieslint.lint(root).errors
    assert len(errors) == 2
    assert errors[0].startswith("patches/series: pkg/long.py:1:89: E501 ")
    assert errors[1].startswith("patches/series: pkg/long.py:1: would change 'z = ")
    (tree / "pyproject.toml").write_text(config.format(400))
    assert serieslint.lint(root).errors == []


def test_patch_that_does_not_apply_to_the_cached_tree_is_named(tmp_path, cache):
    stale = diff("pkg/pool.py", "something else\n", "changed\n")
    patches = {"0001-stale.patch": mail("[Bugfix] Stale", stale)}
    root = make_repo(tmp_path, patches, series="0001-stale.patch\n")
    cached_pristine_tree(root, cache)
    errors = serieslint.lint(root).errors
    assert len(errors) == 1
    assert errors[0].startswith(
        "patches/series: 0001-stale.patch does not apply to the cached pristine tree"
    )


def test_broken_targets_file_is_one_line(tmp_path, capsys):
    write_pins(tmp_path, "[targets.t]\n")
    assert cli.main(["lint", "--root", str(tmp_path)]) == TargetError.exit_code
    err = capsys.readouterr().err
    assert err.startswith("error: target t:")
    assert "Traceback" not in err


def test_a_crlf_patch_is_an_error_without_a_cached_tree(tmp_path, cache):
    crlf = GOOD["0002-notes.patch"].replace("\n", "\r\n")
    root = make_repo(tmp_path, {**GOOD, "0002-notes.patch": crlf})
    assert serieslint.lint(root).errors == [
        "patches/0002-notes.patch:1: CRLF line ending; quilt applies such a patch "
        "and git apply does not, so convert it to LF (dos2unix) and check it "
        "still applies"
    ]


def test_a_series_file_that_is_not_utf8_is_one_error(tmp_path, cache, capsys):
    root = make_repo(tmp_path)
    (root / "patches" / "series").write_bytes(SERIES.encode() + b"\xff.patch\n")
    assert cli.main(["lint", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert f"{root}/patches/series:3: not UTF-8 (byte 0xff at column 1)" in out
    assert "Traceback" not in out


def test_a_patch_that_makes_a_file_not_utf8_is_one_error(tmp_path, cache):
    latin1 = diff("pkg/pool.py", POOL, POOL + "# caf\xe9\n").encode("latin-1")
    root = make_repo(tmp_path, {"0001-size.patch": ""}, series="0001-size.patch\n")
    patch = root / "patches" / "0001-size.patch"
    patch.write_bytes(mail("[Misc] Latin-1", "").encode() + latin1)
    cached_pristine_tree(root, cache)
    assert serieslint.lint(root).errors == [
        "patches/series: pkg/pool.py is not UTF-8 once patched (byte 0xe9 at "
        f"offset {len(POOL) + 5})"
    ]


def test_the_series_is_applied_from_a_cached_sdist_without_a_download(
    tmp_path, cache, capsys
):
    archive = make_sdist(tmp_path / "index", "vllm", "0.33.0", PRISTINE)
    root = make_repo(tmp_path)
    pins = root / "harness" / "targets.toml"
    pins.write_text(pins.read_text().replace(SHA, sha256_of(archive)))
    (cache / "sdists").mkdir(parents=True)
    shutil.copy(archive, cache / "sdists" / archive.name)
    findings = serieslint.lint(root)
    assert findings.errors == []
    assert findings.applied == 1
    assert findings.skipped == []


def test_a_root_that_loops_is_a_usage_error(tmp_path, capsys):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(SystemExit) as stop:
        cli.main(["lint", "--root", str(loop)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"--root {loop}:" in err
    assert "Traceback" not in err
