"""`port`: a series carried onto another release by a three-way merge."""

import os
import shutil
import signal
import subprocess

import pytest
from support.port import (
    AFTER_FIRST,
    NEW_TEST,
    OLD,
    PATCHES,
    POOL,
    SERIES,
    edited,
    make_releases,
    port,
)
from support.series import tree_files
from support.stopping import (
    WAITING_TOOL,
    checkout_prelude,
    end_group,
    start_harness,
    stop,
    wait_for,
)

from harness.errors import OutputError, PortConflict, SeriesError
from harness.series.patch_form import check_patch
from harness.series.port import HOW
from harness.series.port_diff import mail_header


def applied(tree, out, scratch) -> dict[str, str]:
    """The files of ``tree`` with the series in ``out`` applied (git apply)."""
    shutil.copytree(tree, scratch)
    for name in (out / "series").read_text().split():
        subprocess.run(["git", "apply", str(out / name)], cwd=scratch, check=True)
    return {path: text.decode() for path, text in tree_files(scratch).items()}


def outcome_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("[")]


def test_a_series_ported_onto_its_own_release_is_itself_byte_for_byte(
    tmp_path, temporary, monkeypatch, capsys
):
    patches = make_releases(tmp_path, monkeypatch, OLD)
    out = tmp_path / "ported"
    out.mkdir()  # an empty directory is taken
    status, stdout, _ = port(capsys, "--out", str(out), to="old")
    assert status == 0
    assert tree_files(out) == tree_files(patches)
    assert outcome_lines(stdout) == [
        f"[1/2] 0001-fifty.patch: {HOW['as-is']}",
        f"[2/2] 0002-test.patch: {HOW['as-is']}",
    ]
    assert "run-time correctness is NOT verified yet" in stdout.splitlines()[-1]
    assert list(temporary.iterdir()) == []


def test_a_port_where_the_context_moved_writes_the_new_line_numbers(
    tmp_path, temporary, monkeypatch, capsys
):
    new_pool = "import os\n\n\n" + POOL
    make_releases(tmp_path, monkeypatch, {**OLD, "pkg/pool.py": new_pool})
    out = tmp_path / "ported"
    status, stdout, _ = port(capsys, "--out", str(out))
    assert status == 0
    assert outcome_lines(stdout) == [
        f"[1/2] 0001-fifty.patch: {HOW['offsets']}",
        f"[2/2] 0002-test.patch: {HOW['offsets']}",
    ]
    first = (out / "0001-fifty.patch").read_text()
    assert "@@ -22,7 +22,7 @@ def step_4():\n" in first  # three lines further
    assert mail_header(first.encode()) == mail_header(
        PATCHES["0001-fifty.patch"].encode()
    )
    second = (out / "0002-test.patch").read_text()
    assert "--- /dev/null\n+++ b/tests/test_ancestry.py\n@@ -0,0 +1,2 @@\n" in second
    assert second.index("tests/test_ancestry.py") < second.index("pkg/pool.py")
    files = applied(tmp_path / "new-tree", out, tmp_path / "check")
    expected = edited(edited(new_pool, "= 5\n", "= 50\n"), "= 9\n", "= 90\n")
    assert files["pkg/pool.py"] == expected
    assert files["tests/test_ancestry.py"] == NEW_TEST
    for name in PATCHES:
        assert check_patch(out / name, name) == (
            [],
            ["pkg/pool.py"]
            if name == "0001-fifty.patch"
            else ["tests/test_ancestry.py", "pkg/pool.py"],
        )


def test_a_patch_that_does_not_apply_as_it_was_is_carried_by_the_merge(
    tmp_path, temporary, monkeypatch, capsys
):
    # A line of 0001's context changed, one line away from the line it edits.
    new_pool = edited(
        POOL, "= 5\n    return value\n\n", "= 5\n    return value\n# five\n"
    )
    make_releases(tmp_path, monkeypatch, {**OLD, "pkg/pool.py": new_pool})
    original = tmp_path / "patches" / "old" / "0001-fifty.patch"
    plain = subprocess.run(
        ["git", "apply", "--check", str(original)], cwd=tmp_path / "new-tree"
    )
    assert plain.returncode != 0, "the premise: a plain apply fails"
    out = tmp_path / "ported"
    status, stdout, _ = port(capsys, "--out", str(out))
    assert status == 0
    assert outcome_lines(stdout)[0] == f"[1/2] 0001-fifty.patch: {HOW['merged']}"
    assert "+# five\n" not in (out / "0001-fifty.patch").read_text()
    assert " # five\n" in (out / "0001-fifty.patch").read_text()
    files = applied(tmp_path / "new-tree", out, tmp_path / "check")
    assert files["pkg/pool.py"] == edited(
        edited(new_pool, "= 5\n", "= 50\n"), "= 9\n", "= 90\n"
    )


def test_a_conflict_keeps_the_merge_and_writes_nothing(
    tmp_path, temporary, monkeypatch, capsys
):
    new_pool = edited(POOL, "    value = 5\n", "    value = 5  # five\n")
    patches = make_releases(tmp_path, monkeypatch, {**OLD, "pkg/pool.py": new_pool})
    before = tree_files(tmp_path / "patches")
    out = tmp_path / "ported"
    status, stdout, stderr = port(capsys, "--out", str(out))
    assert status == PortConflict.exit_code
    assert outcome_lines(stdout) == [
        "[1/2] 0001-fifty.patch: CONFLICT",
        "[2/2] 0002-test.patch: not tried: it goes on top of 0001-fifty.patch",
    ]
    assert "    pkg/pool.py: lines 22-28" in stdout.splitlines()
    [kept] = temporary.iterdir()
    assert kept.name.startswith("vllm-port-old-to-new-default-merge-")
    error = stderr.splitlines()[-1]
    assert error.startswith(
        "error: 0001-fifty.patch conflicts with target new's tree; nothing was "
        "written (no --out, nothing in patches/). The merge is kept in "
        f"{kept}: resolve it there"
    )
    assert f"rm -rf {kept} when done" in error
    assert "git cherry-pick" in error and "..from` for the patches after it" in error
    lines = (kept / "pkg" / "pool.py").read_text().splitlines()
    assert lines[21].startswith("<<<<<<< ") and lines[27].startswith(">>>>>>> ")
    assert (
        "cherry-pick"
        in subprocess.run(
            ["git", "status"], cwd=kept, capture_output=True, text=True
        ).stdout
    )
    assert not out.exists()
    assert tree_files(tmp_path / "patches") == before
    assert not (patches.parent / "new").exists()


@pytest.mark.parametrize(
    ("new", "conflict"),
    [
        pytest.param(
            {**OLD, "tests/test_ancestry.py": "x = 1\n"},
            "    tests/test_ancestry.py: lines 1-7",
            id="a created file the release has",
        ),
        pytest.param(
            {"tests/test_pool.py": OLD["tests/test_pool.py"]},
            "    pkg/pool.py: target new's tree has no such file, and the patch "
            "changes it",
            id="a file the release lacks",
        ),
    ],
)
def test_a_conflict_names_each_file_and_why(
    tmp_path, temporary, monkeypatch, capsys, new, conflict
):
    make_releases(tmp_path, monkeypatch, new)
    status, stdout, _ = port(capsys, "--out", str(tmp_path / "ported"))
    assert status == PortConflict.exit_code
    assert conflict in stdout.splitlines()
    assert not (tmp_path / "ported").exists()


def test_a_patch_the_release_already_has_needs_hands(
    tmp_path, temporary, monkeypatch, capsys
):
    make_releases(tmp_path, monkeypatch, {**OLD, "pkg/pool.py": AFTER_FIRST})
    status, stdout, stderr = port(capsys, "--out", str(tmp_path / "ported"))
    assert status == PortConflict.exit_code
    assert outcome_lines(stdout)[0] == (
        "[1/2] 0001-fifty.patch: needs hands: the merge changes nothing (target "
        "new's tree has the change already)"
    )
    assert stderr.splitlines()[-1].startswith(
        "error: 0001-fifty.patch changes nothing on target new's tree"
    )
    assert not (tmp_path / "ported").exists()


def test_without_out_the_series_goes_to_a_new_temporary_folder(
    tmp_path, temporary, monkeypatch, capsys
):
    make_releases(tmp_path, monkeypatch, OLD)
    status, stdout, _ = port(capsys, to="old")
    assert status == 0
    [made] = temporary.iterdir()
    assert made.name.startswith("vllm-port-old-to-old-")
    assert f") to {made}" in stdout
    assert sorted(tree_files(made)) == sorted([*PATCHES, "series"])


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("patches/new", "is {root}/patches/new, the patches directory of target new"),
        ("patches/old/x", "is inside {root}/patches/old, the patches directory"),
        ("cache/ported", "is inside the harness cache {root}/cache"),
        ("full", "is not empty; give a new or empty directory"),
        ("file", "is not a directory; give a new or empty directory"),
    ],
)
def test_an_out_that_cannot_be_used_is_refused_before_any_work(
    tmp_path, temporary, cache, monkeypatch, capsys, where, message
):
    make_releases(tmp_path, monkeypatch, OLD)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep").write_text("mine")
    (tmp_path / "file").write_text("mine")
    before = tree_files(tmp_path)
    status, stdout, stderr = port(capsys, "--out", str(tmp_path / where))
    assert status == OutputError.exit_code
    assert stdout == ""
    [line] = stderr.splitlines()
    assert line.startswith(f"error: --out {tmp_path / where} ")
    assert message.format(root=tmp_path) in line
    assert tree_files(tmp_path) == before


def test_a_tier_without_a_series_file_is_one_line(
    tmp_path, temporary, monkeypatch, capsys
):
    make_releases(tmp_path, monkeypatch, OLD)
    status, _, stderr = port(capsys, "--tier", "strict", "--out", str(tmp_path / "o"))
    assert status == SeriesError.exit_code
    [line] = stderr.splitlines()
    assert "series file" in line and "series.strict does not exist" in line


def start_stopped_port(tmp_path):
    """`port` in a child, waiting in the merge on a stand-in diff."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "diff").write_text(WAITING_TOOL)
    (bin_dir / "diff").chmod(0o755)
    (tmp_path / "tmp").mkdir(exist_ok=True)
    files = {name: tmp_path / name for name in ("ready", "pid")}
    process = start_harness(
        ["port", "--from", "old", "--to", "old", "--out", str(tmp_path / "out")],
        prelude=checkout_prelude(tmp_path),
        env={
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "TMPDIR": str(tmp_path / "tmp"),
            "HARNESS_TEST_READY": str(files["ready"]),
            "HARNESS_TEST_PID": str(files["pid"]),
        },
    )
    wait_for(files["ready"], process)
    return process


@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)]
)
def test_a_stopped_port_leaves_nothing(tmp_path, monkeypatch, signum, status):
    make_releases(tmp_path, monkeypatch, OLD)
    before = tree_files(tmp_path / "patches")
    process = start_stopped_port(tmp_path)
    [work] = (tmp_path / "tmp").iterdir()
    assert (work / "merge" / ".git").is_dir(), "stopped in the merge"
    result = stop(process, signum)
    assert result.returncode == status, result.stderr
    assert list((tmp_path / "tmp").iterdir()) == []
    assert not (tmp_path / "out").exists()
    assert tree_files(tmp_path / "patches") == before


def test_what_a_killed_port_leaves_is_swept_by_the_next(
    tmp_path, temporary, monkeypatch, capsys
):
    make_releases(tmp_path, monkeypatch, OLD)
    process = start_stopped_port(tmp_path)
    [work] = temporary.iterdir()
    process.kill()
    process.communicate()
    end_group(int((tmp_path / "pid").read_text()))
    status, _, stderr = port(capsys, "--out", str(tmp_path / "out"), to="old")
    assert status == 0
    assert f"harness: removed {work}, left behind by an earlier run" in stderr
    assert sorted(path.name for path in temporary.iterdir()) == []
    assert (tmp_path / "out" / "series").read_text() == SERIES


def test_a_file_whose_change_the_release_has_is_left_out_and_said(
    tmp_path, temporary, monkeypatch, capsys
):
    new_pool = edited(POOL, "    value = 9\n", "    value = 90\n")
    make_releases(tmp_path, monkeypatch, {**OLD, "pkg/pool.py": new_pool})
    out = tmp_path / "ported"
    status, stdout, _ = port(capsys, "--out", str(out))
    assert status == 0
    assert stdout.splitlines()[1:3] == [
        f"[2/2] 0002-test.patch: {HOW['merged']}",
        "    pkg/pool.py: left out, target new's tree has its change already",
    ]
    second = (out / "0002-test.patch").read_text()
    assert "pkg/pool.py" not in second and "+++ b/tests/test_ancestry.py" in second
