"""`fetch --target T --git DIR`: a git checkout of the target's release made
from its pinned sdist, which `apply --onto` takes, with export's base commit."""

import os
import subprocess
import sys

import pytest
from support.installed import SDIST, release_target, run_verb, snapshot
from support.trees import target_table, use_checkout, write_pins

from harness.errors import OutputError, TargetError
from harness.submission.commits import commit_pristine
from harness.targets import get_target
from harness.trees.sources import pristine_tree


def git(checkout, *args) -> str:
    return subprocess.run(
        ["git", "-C", str(checkout), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture
def release(tmp_path, monkeypatch):
    """Target t: the sdist of vllm 9.9.9, cached; git's own settings of the
    user are left out of the checkout (a global gpg signing, say)."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-gitconfig"))
    (tmp_path / "no-gitconfig").write_text("[commit]\n\tgpgsign = true\n")
    return release_target(tmp_path, monkeypatch)


def test_the_release_is_one_tagged_commit_of_every_file(release, tmp_path, capsys):
    dest = tmp_path / "fork"
    status, out, err = run_verb(capsys, "fetch", "--target", "t", "--git", str(dest))
    assert status == 0, err
    assert out == f"{dest}\n"
    assert git(dest, "tag") == "v9.9.9"
    assert git(dest, "describe", "--tags") == "v9.9.9"
    assert git(dest, "status", "--porcelain") == ""
    assert git(dest, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git(dest, "log", "--format=%an <%ae> %aI", "-1") == (
        "vllm-kv-series export <export@localhost> 2000-01-01T00:00:00+00:00"
    )
    files = {k: v for k, v in snapshot(dest).items() if not k.startswith(".git/")}
    assert files == snapshot(pristine_tree(get_target("t")))
    assert set(SDIST) <= set(files)
    assert all(os.stat(dest / path).st_mode & 0o200 for path in files)
    assert f"next: {sys.executable} -m harness apply --target t --onto" in err
    assert [path.name for path in tmp_path.iterdir() if "scratch" in path.name] == []


def test_its_commit_is_the_base_commit_of_exports_mails(release, tmp_path, capsys):
    dest = tmp_path / "fork"
    assert run_verb(capsys, "fetch", "--target", "t", "--git", str(dest))[0] == 0
    target = get_target("t")
    base = commit_pristine(target, pristine_tree(target), tmp_path / "export")
    assert git(dest, "rev-parse", "HEAD") == base


def test_bytecode_left_in_the_cached_tree_is_no_file_of_the_release(
    release, tmp_path, capsys
):
    """A Python that ran in the cached tree may have left bytecode there:
    the checkout is the release's files alone, its commit the same."""
    dest = tmp_path / "fork"
    assert run_verb(capsys, "fetch", "--target", "t", "--git", str(dest))[0] == 0
    tree = pristine_tree(get_target("t"))
    module = next(path for path in tree.rglob("*.py"))
    bytecode = module.parent / "__pycache__" / f"{module.stem}.cpython-311.pyc"
    os.chmod(module.parent, 0o755)
    bytecode.parent.mkdir()
    bytecode.write_bytes(b"stale")
    again = tmp_path / "fork-again"
    assert run_verb(capsys, "fetch", "--target", "t", "--git", str(again))[0] == 0
    assert not any(again.rglob("__pycache__"))
    assert git(again, "rev-parse", "HEAD") == git(dest, "rev-parse", "HEAD")


def test_apply_onto_takes_it(release, tmp_path, capsys):
    dest = tmp_path / "fork"
    assert run_verb(capsys, "fetch", "--target", "t", "--git", str(dest))[0] == 0
    status, _, err = run_verb(capsys, "apply", "--target", "t", "--onto", str(dest))
    assert status == 0, err
    assert f"{dest} is vLLM 9.9.9 (tag v9.9.9)" in err
    changed = git(dest, "status", "--porcelain").splitlines()
    assert sorted(line.split()[-1] for line in changed) == [
        "tests/test_pool.py",
        "vllm/v1/core/block_pool.py",
    ]


def test_an_existing_directory_is_refused_before_any_work(release, tmp_path, capsys):
    dest = tmp_path / "fork"
    dest.mkdir()
    status, out, err = run_verb(capsys, "fetch", "--target", "t", "--git", str(dest))
    assert (status, out) == (OutputError.exit_code, "")
    assert err == f"error: {dest} already exists; give a path that does not\n"
    assert list(dest.iterdir()) == []


def test_a_directory_inside_the_caches_trees_is_refused(release, capsys):
    dest = release / "trees" / "fork"
    status, _, err = run_verb(capsys, "fetch", "--target", "t", "--git", str(dest))
    assert status == OutputError.exit_code
    assert err.startswith(f"error: --git {dest} is inside the harness cache's ")
    assert not dest.exists()


def test_a_target_that_is_no_release_is_refused(tmp_path, monkeypatch, capsys):
    source = f'{{ git = "https://git.invalid/vllm", commit = "{"a" * 40}" }}'
    use_checkout(monkeypatch, write_pins(tmp_path, target_table(source)))
    dest = tmp_path / "fork"
    status, _, err = run_verb(capsys, "fetch", "--target", "t", "--git", str(dest))
    assert status == TargetError.exit_code
    [line] = err.splitlines()
    assert "not a release's sdist; --git makes a checkout of a release" in line
    assert not dest.exists()


def test_a_git_that_fails_leaves_no_directory(release, tmp_path, monkeypatch, capsys):
    from harness.errors import SourceError
    from harness.trees import git_release

    real = git_release.processes.run

    def failing(command, **kwargs):
        if "commit" in command:
            return subprocess.CompletedProcess(command, 128, "", "fatal: disk full\n")
        return real(command, **kwargs)

    monkeypatch.setattr(git_release.processes, "run", failing)
    dest = tmp_path / "fork"
    status, _, err = run_verb(capsys, "fetch", "--target", "t", "--git", str(dest))
    assert status == SourceError.exit_code
    assert err.splitlines()[-1].endswith(": fatal: disk full")
    assert not dest.exists()
    assert [path.name for path in tmp_path.iterdir() if "scratch" in path.name] == []
