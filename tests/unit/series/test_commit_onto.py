"""`apply --onto --commit`: one commit per patch, authored from its mail
headers, or nothing at all."""

import pytest
from support.series import PRISTINE, edited, git, make_fork, make_series, tree_files
from support.trees import diff

from harness import cli, processes
from harness.series import commit_onto as commit_module

POOL = PRISTINE["vllm/block_pool.py"]


def mail(author: str, date: str, subject: str, body: str, patch: str) -> str:
    return (
        f"From: {author}\nDate: {date}\nSubject: {subject}\n\n{body}\n\n"
        f"Signed-off-by: {author}\n---\n{patch}"
    )


PATCHES = {
    "0001-parent.patch": mail(
        "Ann Author <ann@example.com>",
        "Mon, 30 Nov 2026 11:09:47 +0000",
        "[Bugfix][KV Events] Emit the parent",
        "Why: the parent was never reported.",
        diff("vllm/block_pool.py", POOL, edited(POOL, "line 3\n", "line three\n")),
    ),
    "0002-module.patch": mail(
        "Bo Builder <bo@example.com>",
        "Tue, 01 Dec 2026 08:00:00 +0000",
        "[Core] Add the ancestry module",
        "A new module.",
        diff("vllm/events/ancestry.py", None, "FILLED = 1\n"),
    ),
}
SERIES = "0001-parent.patch\n0002-module.patch\n"
IDENTITY = {
    "GIT_COMMITTER_NAME": "Committer",
    "GIT_COMMITTER_EMAIL": "committer@example.com",
}


@pytest.fixture
def fork(tmp_path, monkeypatch):
    for name, value in IDENTITY.items():
        monkeypatch.setenv(name, value)
    make_series(tmp_path, monkeypatch, PATCHES, SERIES)
    return make_fork(tmp_path)


def work_tree(fork):
    """The checkout's files, git's own bookkeeping (reflog, objects) aside."""
    return {k: v for k, v in tree_files(fork).items() if not k.startswith(".git/")}


def commits(fork):
    log = git("log", "--reverse", "--format=%an <%ae>|%aD|%s|%cn", "HEAD~2..", cwd=fork)
    return log.splitlines()


def test_each_patch_is_a_commit_authored_from_its_headers(fork, capsys):
    assert cli.main(["apply", "--target", "t", "--onto", str(fork), "--commit"]) == 0
    assert commits(fork) == [
        "Ann Author <ann@example.com>|Mon, 30 Nov 2026 11:09:47 +0000|"
        "[Bugfix][KV Events] Emit the parent|Committer",
        "Bo Builder <bo@example.com>|Tue, 1 Dec 2026 08:00:00 +0000|"
        "[Core] Add the ancestry module|Committer",
    ]
    assert "Signed-off-by: Ann Author" in git("log", "-1", "HEAD~1", cwd=fork)
    assert git("status", "--porcelain", cwd=fork) == ""
    assert (fork / "vllm/events/ancestry.py").read_text() == "FILLED = 1\n"
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" ", 1)[1] for line in out] == [
        "[Bugfix][KV Events] Emit the parent",
        "[Core] Add the ancestry module",
    ]


def test_committed_or_not_the_tree_is_the_same(fork, tmp_path):
    other = tmp_path / "other"
    git("clone", "-q", str(fork), str(other), cwd=tmp_path)
    assert cli.main(["apply", "--target", "t", "--onto", str(fork), "--commit"]) == 0
    assert cli.main(["apply", "--target", "t", "--onto", str(other)]) == 0
    assert work_tree(fork) == work_tree(other)
    assert git("status", "--porcelain", cwd=other) != ""  # left uncommitted


def test_a_patch_that_does_not_apply_leaves_the_branch_where_it_was(
    fork, tmp_path, capsys
):
    (tmp_path / "patches" / "0002-module.patch").write_text(
        PATCHES["0002-module.patch"].replace("FILLED = 1", "x")
        + diff("vllm/block_pool.py", "no such text\n", "other\n")
    )
    head = git("rev-parse", "HEAD", cwd=fork)
    before = work_tree(fork)
    status = cli.main(["apply", "--target", "t", "--onto", str(fork), "--commit"])
    assert status == 7
    err = capsys.readouterr().err
    assert "error: patch 0002-module.patch from " in err
    assert f"(git am, no fuzz); {fork} is back at {head[:12]}" in err
    assert git("rev-parse", "HEAD", cwd=fork) == head
    assert work_tree(fork) == before
    assert git("status", "--porcelain", cwd=fork) == ""


@pytest.mark.hostile
def test_a_commit_gpg_cannot_sign_is_named_not_called_a_patch_that_fails(fork, capsys):
    git("config", "commit.gpgsign", "true", cwd=fork)
    git("config", "gpg.program", "false", cwd=fork)
    head = git("rev-parse", "HEAD", cwd=fork)
    before = work_tree(fork)
    status = cli.main(["apply", "--target", "t", "--onto", str(fork), "--commit"])
    assert status == 7
    err = capsys.readouterr().err
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert line.startswith("error: patch 0001-parent.patch from ") and line.endswith(
        " applies, but git could not commit it: the checkout's git configuration "
        "signs every commit (commit.gpgsign) and signing failed; make signing "
        "work (its key, its agent), or turn it off for this checkout (git config "
        f"commit.gpgsign false), or apply without --commit; {fork} is back at "
        f"{head[:12]}:"
    )
    assert "does not apply" not in err
    assert "gpg failed to sign the data" in err  # git's own words follow
    assert git("rev-parse", "HEAD", cwd=fork) == head
    assert work_tree(fork) == before
    assert git("status", "--porcelain", cwd=fork) == ""


@pytest.mark.hostile
def test_a_hook_that_refuses_the_commit_is_named_not_called_a_patch_that_fails(
    fork, capsys
):
    hook = fork / ".git" / "hooks" / "pre-applypatch"
    hook.write_text("#!/bin/sh\necho 'no commits today' >&2\nexit 1\n")
    hook.chmod(0o755)
    head = git("rev-parse", "HEAD", cwd=fork)
    before = work_tree(fork)
    status = cli.main(["apply", "--target", "t", "--onto", str(fork), "--commit"])
    assert status == 7
    err = capsys.readouterr().err
    assert " applies, but git could not commit it: a hook of the checkout " in err
    assert "does not apply" not in err
    assert git("rev-parse", "HEAD", cwd=fork) == head
    assert work_tree(fork) == before
    assert git("status", "--porcelain", cwd=fork) == ""


@pytest.mark.hostile
def test_a_stop_signal_during_the_commits_leaves_the_branch_where_it_was(
    fork, monkeypatch
):
    head = git("rev-parse", "HEAD", cwd=fork)
    before = work_tree(fork)
    run = processes.run
    seen = []

    def interrupted_at_the_second_patch(command, **options):
        if "am" in command and "--abort" not in command:
            seen.append(command)
            if len(seen) == 2:
                raise KeyboardInterrupt
        return run(command, **options)

    monkeypatch.setattr(processes, "run", interrupted_at_the_second_patch)
    assert cli.main(["apply", "--target", "t", "--onto", str(fork), "--commit"]) == 130
    assert len(seen) == 2
    assert git("rev-parse", "HEAD", cwd=fork) == head
    assert work_tree(fork) == before
    assert git("status", "--porcelain", cwd=fork) == ""


@pytest.mark.hostile
def test_work_done_in_the_checkout_meanwhile_is_never_reset(fork, monkeypatch, capsys):
    run = processes.run

    def user_edits_then_a_patch_fails(command, **options):
        if "am" in command and "--abort" not in command:
            (fork / "README.md").write_text("the user's own edit\n")
            raise KeyboardInterrupt
        return run(command, **options)

    monkeypatch.setattr(commit_module.processes, "run", user_edits_then_a_patch_fails)
    assert cli.main(["apply", "--target", "t", "--onto", str(fork), "--commit"]) == 7
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith(f"error: {fork} changed while the series was being committed")
    assert "git reset --hard " in err
    assert (fork / "README.md").read_text() == "the user's own edit\n"


def test_without_a_git_identity_nothing_is_applied(fork, monkeypatch, capsys):
    for name in IDENTITY:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(fork.parent))  # no ~/.gitconfig
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    git("config", "user.useConfigOnly", "true", cwd=fork)
    head = git("rev-parse", "HEAD", cwd=fork)
    status = cli.main(["apply", "--target", "t", "--onto", str(fork), "--commit"])
    assert status == 7
    assert "git has no identity to commit with in " in capsys.readouterr().err
    assert git("rev-parse", "HEAD", cwd=fork) == head
    assert git("status", "--porcelain", cwd=fork) == ""


def test_commit_goes_with_onto(fork, tmp_path, capsys):
    with pytest.raises(SystemExit) as usage:
        cli.main(["apply", "--target", "t", "--dest", str(tmp_path / "d"), "--commit"])
    assert usage.value.code == 2
    assert "--commit goes with --onto" in capsys.readouterr().err


def killed_after_the_first_commit(fork, tmp_path):
    """What a --commit run SIGKILLed between its two git am's leaves: the
    first patch committed, as git am commits it."""
    patch = tmp_path / "patches" / "0001-parent.patch"
    git("am", "--quiet", "--keep-non-patch", str(patch), cwd=fork)
    return git("rev-parse", "HEAD~1", cwd=fork), git("rev-parse", "HEAD", cwd=fork)


@pytest.mark.hostile
@pytest.mark.parametrize("commit", [True, False], ids=["commit", "uncommitted"])
def test_the_run_after_a_killed_one_says_which_commits_it_left(
    fork, tmp_path, capsys, commit
):
    base, first = killed_after_the_first_commit(fork, tmp_path)
    before = work_tree(fork)
    argv = ["apply", "--target", "t", "--onto", str(fork)]
    assert cli.main(argv + ["--commit"] * commit) == 7
    [line] = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert line == (
        f"error: {fork} already carries 1 of the 2 commit(s) of tier default's "
        f"series (0001-parent.patch as {first[:12]}): from an earlier --commit "
        f"run that was killed, or applied before; `git reset --hard {base[:12]}` "
        f"goes back to before them (dropping them and whatever was committed "
        f"after them), then apply again"
    )
    assert git("rev-parse", "HEAD", cwd=fork) == first
    assert work_tree(fork) == before


@pytest.mark.hostile
def test_a_checkout_in_the_middle_of_a_git_am_is_refused(fork, capsys):
    (fork / ".git" / "rebase-apply").mkdir()
    head = git("rev-parse", "HEAD", cwd=fork)
    assert cli.main(["apply", "--target", "t", "--onto", str(fork), "--commit"]) == 7
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"error: {fork} is in the middle of a git am or rebase (.git/rebase-apply "
        f"exists: an earlier run that was killed?); end it first: `git am "
        f"--abort` (or `git rebase --abort`)"
    )
    assert git("rev-parse", "HEAD", cwd=fork) == head


def test_a_commit_of_the_same_subject_by_someone_else_is_not_the_series(fork, capsys):
    (fork / "NOTES.md").write_text("mine\n")
    git("add", "NOTES.md", cwd=fork)
    git(
        "-c", "user.name=Someone", "-c", "user.email=someone@example.com",
        "commit", "-qm", "[Bugfix][KV Events] Emit the parent", cwd=fork,
    )  # fmt: skip
    assert cli.main(["apply", "--target", "t", "--onto", str(fork), "--commit"]) == 0
