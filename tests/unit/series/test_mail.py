import json
import os
import shutil
import subprocess

import pytest
from support.trees import diff, target_table, use_checkout, write_pins, write_tree

from harness import cli, targets
from harness.errors import ExportError
from harness.series.apply import build_patched_tree
from harness.verdict import Conformance, Verdict

PRISTINE = {
    "vllm/block_pool.py": "".join(f"line {n}\n" for n in range(1, 21)),
    "vllm/old.py": "doomed = True\n",
    "tests/test_pool.py": "def test_pool():\n    assert True\n",
    # a sdist's .gitignore must not keep files out of the exported base
    ".gitignore": "*.log\n",
    "notes.log": "shipped in the sdist although ignored\n",
}
POOL = PRISTINE["vllm/block_pool.py"]
AUTHOR = "Ada Lovelace <ada@example.org>"
SIGN_OFF = f"Signed-off-by: {AUTHOR}\n"


def mail(subject: str, body: str, diff_text: str, sign_off: str = SIGN_OFF) -> str:
    return (
        f"From: {AUTHOR}\nDate: Mon, 30 Nov 2026 01:28:02 +0000\n"
        f"Subject: {subject}\n\n{body}\n\n{sign_off}---\n{diff_text}"
    )


PATCHES = {
    "0001-emit-parent.patch": mail(
        "[Bugfix][KV Events] Emit the parent",
        "Report the boundary.",
        diff("vllm/block_pool.py", POOL, POOL.replace("line 3\n", "line three\n")),
    ),
    "0002-add-module.patch": mail(
        "[Core] Add the ancestry module",
        "A new module.",
        diff("vllm/events/ancestry.py", None, "FILLED = 1\n")
        + diff("notes.log", PRISTINE["notes.log"], "patched too\n"),
    ),
    "0003-drop-old.patch": mail(
        "[Misc] Drop the old module",
        "Optional: only in the strict tier.",
        diff("vllm/old.py", PRISTINE["vllm/old.py"], None),
    ),
}
SERIES = "0001-emit-parent.patch\n0002-add-module.patch\n"
STRICT = SERIES + "0003-drop-old.patch\n"
GIT_IDENTITY = ["-c", "user.name=Test", "-c", "user.email=test@example.org"]


def make_target(tmp_path, monkeypatch, patches=PATCHES, series=SERIES):
    """Target t: a path source with PRISTINE and these mails as its series."""
    patches_dir = write_tree(tmp_path / "patches", patches)
    (patches_dir / "series").write_text(series)
    (patches_dir / "series.strict").write_text(STRICT)
    write_tree(tmp_path / "pristine", PRISTINE)
    pins = write_pins(tmp_path, target_table('{ path = "pristine" }'))
    use_checkout(monkeypatch, pins)
    return targets.get_target("t")


def export(out, *options):
    return cli.main(["export", "--target", "t", "--out", str(out), *options])


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
        if path.is_file() and ".git" not in path.relative_to(root).parts
    }


def write_verdict(path, tier="default", conformance=None, patched_outcome="passed"):
    verdict = Verdict(
        target="t",
        tier=tier,
        selection="ci",
        pristine={"tests/test_pool.py::test_pool": "passed"},
        patched={
            "tests/test_pool.py::test_pool": patched_outcome,
            "tests/test_pool.py::test_new": "passed",
        },
        conformance=conformance or Conformance("passed", 4, 0),
        wall_seconds=83.0,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(verdict.as_json(), indent=1))
    return path


SUBJECTS = [
    "[Bugfix][KV Events] Emit the parent",
    "[Core] Add the ancestry module",
    "[Misc] Drop the old module",
]


@pytest.mark.parametrize(("tier", "count"), [("default", 2), ("strict", 3)])
def test_git_am_of_the_mails_gives_the_tree_that_apply_builds(
    tmp_path, monkeypatch, cache, tier, count
):
    target = make_target(tmp_path, monkeypatch)
    assert export(tmp_path / "mails", "--tier", tier) == 0
    mails = sorted((tmp_path / "mails").iterdir())
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
    author = git(checkout, "log", "-1", "--format=%an <%ae>")
    assert author.strip() == AUTHOR


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
    write_verdict(cache / "reports" / "t-strict-ci.json", "strict", conformance)
    assert export(tmp_path / "mails", "--tier", "strict") == 0
    out = capsys.readouterr().out
    assert "0000-cover-letter.patch" in out
    assert "0003-Misc-Drop-the-old-module.patch" in out

    letter = (tmp_path / "mails" / "0000-cover-letter.patch").read_text()
    assert "*** SUBJECT HERE ***" not in letter
    assert "*** BLURB HERE ***" not in letter
    assert (
        "Subject: [PATCH 0/3] [Bugfix][KV Events] Make the KV-cache event stream "
        "reconstructable for partial prefix-cache entries\n"
    ) in letter
    assert f"From: {AUTHOR}\n" in letter
    assert "  1/3 [Bugfix][KV Events] Emit the parent\n" in letter
    assert "  2/3 [Core] Add the ancestry module\n" in letter
    assert "  3/3 [Misc] Drop the old module  (optional)\n" in letter
    assert "  passed             1         2\n" in letter
    assert "regressions (passed on pristine, not on patched): 0" in letter
    assert "tests added by the series: 1, 0 of them failing" in letter
    assert "conformance suite: passed, 4 passed, 0 failed" in letter
    assert "  seeded workloads replayed: 24\n" in letter
    assert "  stream class              pristine   patched\n" in letter
    assert "  K1 unreported ancestry           7         0\n" in letter
    assert "  K5 physical copies               2         2\n" in letter
    assert "  C1 parent closure                7         0\n" in letter
    assert "  wire byte-identity:\n    byte_identical: True\n" in letter
    assert "  target:" not in letter
    assert "Verdict: PASS" in letter
    assert "AI assistance" in letter
    assert "Developer\nCertificate of Origin" in letter
    assert "git am --keep-non-patch" in letter


def test_base_commit_is_the_same_on_every_export(tmp_path, monkeypatch, cache):
    make_target(tmp_path, monkeypatch)
    bases = []
    for out in ("one", "two"):
        assert export(tmp_path / out) == 0
        letter = (tmp_path / out / "0000-cover-letter.patch").read_text()
        bases += [line for line in letter.splitlines() if line.startswith("base-")]
    assert len(bases) == 2
    assert bases[0] == bases[1]


def test_missing_verdict_is_said_plainly_and_warned(
    tmp_path, monkeypatch, cache, capsys
):
    make_target(tmp_path, monkeypatch)
    write_verdict(cache / "reports" / "t-strict-ci.json", "strict")  # another tier
    assert export(tmp_path / "mails") == 0
    err = capsys.readouterr().err
    assert "warning: no verdict for target t tier default" in err
    letter = (tmp_path / "mails" / "0000-cover-letter.patch").read_text()
    assert "No test verdict was found for target t, tier default" in letter
    assert "Evidence:" not in letter
    assert "Verdict:" not in letter


def test_failing_verdict_is_reported_as_a_fail_with_its_reason(
    tmp_path, monkeypatch, cache, capsys
):
    make_target(tmp_path, monkeypatch)
    verdict = write_verdict(tmp_path / "v.json", patched_outcome="failed")
    assert export(tmp_path / "mails", "--verdict", str(verdict)) == 0
    assert "is a FAIL" in capsys.readouterr().err
    letter = (tmp_path / "mails" / "0000-cover-letter.patch").read_text()
    assert "regressions (passed on pristine, not on patched): 1" in letter
    assert "    tests/test_pool.py::test_pool: passed -> failed\n" in letter
    assert "Verdict: FAIL (1 regression(s))" in letter


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
                "[Bugfix] Stale",
                "Does not apply.",
                diff("vllm/block_pool.py", "nothing like it\n", "changed\n"),
            ),
            "patch 0002-add-module.patch from",
        ),
        (
            mail(
                "[Core] Unsigned",
                "No sign-off.",
                diff("vllm/events/ancestry.py", None, "FILLED = 1\n"),
                sign_off="",
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
    out = tmp_path / "out" / "mails"
    assert export(out) == ExportError.exit_code
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert not out.exists()
    assert list((tmp_path / "out").iterdir()) == []


def test_existing_out_directory_is_refused(tmp_path, monkeypatch, cache, capsys):
    make_target(tmp_path, monkeypatch)
    (tmp_path / "mails").mkdir()
    assert export(tmp_path / "mails") == ExportError.exit_code
    assert "already exists" in capsys.readouterr().err
    assert list((tmp_path / "mails").iterdir()) == []
