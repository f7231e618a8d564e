import pytest

from harness import cache


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_cache_dir_follows_override_then_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "own"))
    assert cache.root() == tmp_path / "own"
    monkeypatch.delenv("HARNESS_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.root() == tmp_path / "xdg" / "vllm-kv-series"


@pytest.mark.hostile
def test_a_cache_that_is_a_symlink_loop_is_one_line(monkeypatch, tmp_path, capsys):
    from harness import cli

    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "a"))
    assert cli.main(["fetch", "--target", "main"]) == 17
    err = capsys.readouterr().err
    assert err.startswith(f"error: the harness cache {tmp_path / 'a'} cannot be used: ")
    assert err.rstrip().endswith("; set HARNESS_CACHE_DIR to a directory")
    assert err.count("\n") == 1


def test_a_run_waiting_for_a_lock_says_for_whom(monkeypatch, tmp_path, capsys):
    import subprocess
    import sys
    import threading
    import time

    from support import REPO_ROOT

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    ready, go = tmp_path / "ready", tmp_path / "go"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import pathlib, sys, time\n"
            "from harness import cache\n"
            "with cache.lock('tree-x'):\n"
            f"    pathlib.Path({str(ready)!r}).touch()\n"
            f"    while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.02)\n",
            "fetch",
            "--target",
            "main",
        ],
        cwd=REPO_ROOT,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    while not ready.exists():
        assert holder.poll() is None
        time.sleep(0.02)
    threading.Timer(0.5, go.touch).start()
    with cache.lock("tree-x"):
        pass
    holder.wait(timeout=60)
    err = capsys.readouterr().err
    assert err.startswith(
        f"harness: waiting for tree-x in the harness cache, which another run "
        f"holds (pid {holder.pid}, python -m harness fetch --target main, since "
    )


@pytest.mark.hostile
def test_a_lock_holder_note_is_shown_without_its_escapes(cache_dir, capsys):
    import fcntl
    import os
    import threading

    path = cache.directory(cache_dir / "locks") / "tree-x.lock"
    held = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_EX)
    os.write(held, b"\x1b]0;PWNED\x07\x1b[31mRED\rFAKE: done\n")
    threading.Timer(0.3, os.close, [held]).start()
    with cache.lock("tree-x"):
        pass
    assert capsys.readouterr().err == (
        "harness: waiting for tree-x in the harness cache, which another run "
        "holds (\\x1b]0;PWNED\\x07\\x1b[31mRED\\rFAKE: done)\n"
    )


def _cache_refused(monkeypatch, tmp_path, capsys, **env) -> str:
    """Run `fetch` with the cache's variables set to ``env`` from an empty
    working directory; return the one line, and check nothing was written."""
    from harness import cli

    for name in ("HARNESS_CACHE_DIR", "XDG_CACHE_HOME", "HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    assert cli.main(["fetch", "--target", "main"]) == 17
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert list(cwd.iterdir()) == []
    return err


@pytest.mark.hostile
def test_an_empty_home_is_refused_not_taken_for_root(monkeypatch, tmp_path, capsys):
    err = _cache_refused(monkeypatch, tmp_path, capsys, HOME="")
    assert err == (
        "error: HOME is empty, so the harness cache (~/.cache/vllm-kv-series) "
        "has no place; set HARNESS_CACHE_DIR to a directory (or XDG_CACHE_HOME)\n"
    )


@pytest.mark.hostile
def test_a_relative_home_is_refused(monkeypatch, tmp_path, capsys):
    err = _cache_refused(monkeypatch, tmp_path, capsys, HOME="home")
    assert err.startswith("error: HOME is a relative path (home), so the harness ")


@pytest.mark.hostile
def test_a_relative_xdg_cache_home_is_refused(monkeypatch, tmp_path, capsys):
    err = _cache_refused(monkeypatch, tmp_path, capsys, HOME="", XDG_CACHE_HOME="c")
    assert err == (
        "error: XDG_CACHE_HOME is a relative path (c), so the harness cache has "
        "no fixed place; set XDG_CACHE_HOME to an absolute path, or "
        "HARNESS_CACHE_DIR to a directory\n"
    )


def test_an_empty_home_is_no_matter_when_the_cache_is_set(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", "")
    monkeypatch.delenv("HARNESS_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.root() == tmp_path / "vllm-kv-series"
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "own"))
    assert cache.root() == tmp_path / "own"


def _trees(cache_dir):
    """A cache with a pristine and a patched tree in it."""
    from support.trees import write_tree

    write_tree(cache_dir / "trees" / "sdist-vllm-x", {"vllm/a.py": "a = 1\n"})
    write_tree(cache_dir / "patched" / "t-default-k", {"vllm/a.py": "a = 2\n"})
    return cache_dir


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("argv", "where", "option"),
    [
        (["apply", "--target", "t", "--dest"], "trees/sdist-vllm-x/out", "--dest"),
        (["apply", "--target", "t", "--dest"], "patched/t-default-k/x", "--dest"),
        (["apply", "--target", "t", "--dest"], "patched/new", "--dest"),
        (["apply", "--target", "t", "--onto"], "trees/sdist-vllm-x", "--onto"),
        (
            ["apply", "--target", "t", "--commit", "--onto"],
            "patched/t-default-k",
            "--onto",
        ),
        (["apply", "--target", "t", "--dest"], "LINK/out", "--dest"),
        (
            ["capture", "--zmq", "tcp://127.0.0.1:9", "--timeout", "1", "--out"],
            "trees/sdist-vllm-x/kv.bin",
            "",
        ),
        (
            ["workloads", "--config", "pool-2x6", "--out"],
            "patched/t-default-k/run.rec",
            "",
        ),
    ],
    ids=[
        "dest-pristine",
        "dest-patched",
        "dest-patched-folder",
        "onto",
        "commit-onto",
        "dest-by-symlink",
        "capture",
        "workloads",
    ],
)
@pytest.mark.hostile
def test_no_verb_writes_into_the_caches_trees(
    tmp_path, monkeypatch, capsys, cache, argv, where, option
):
    from support.digest import changed, tree_digest
    from support.series import GOOD_PATCHES, GOOD_SERIES, make_series

    from harness import cli

    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    _trees(cache)
    (tmp_path / "LINK").symlink_to(cache / "trees" / "sdist-vllm-x")
    path = tmp_path / where if where.startswith("LINK") else cache / where
    before = tree_digest(tmp_path)
    assert cli.main([*argv, str(path)]) == 11
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    folder = cache / where.split("/")[0] if not where.startswith("LINK") else None
    assert err == (
        f"error: {option + ' ' if option else ''}{path} is inside the harness "
        f"cache's {folder or cache / 'trees'}, whose trees every run reads as "
        f"they were made; no verb writes there: give a path outside it\n"
    )
    assert changed(before, tree_digest(tmp_path)) == []


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("argv", "where", "option"),
    [
        (["apply", "--target", "t", "--dest"], "MOUNT/out", "--dest "),
        (["apply", "--target", "t", "--onto"], "MOUNT", "--onto "),
        (
            ["capture", "--zmq", "tcp://127.0.0.1:9", "--timeout", "1", "--out"],
            "MOUNT/kv.bin",
            "",
        ),
    ],
    ids=["dest", "onto", "capture"],
)
def test_no_verb_writes_into_a_tree_of_the_cache_mounted_elsewhere(
    tmp_path, monkeypatch, capsys, cache, argv, where, option
):
    """MOUNT a bind mount of a cached tree (root only): the same device and
    inode under another path, which no symlink and no resolved path shows."""
    import os

    from support.digest import changed, tree_digest
    from support.series import GOOD_PATCHES, GOOD_SERIES, make_series

    from harness import cli

    make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    tree = _trees(cache) / "trees" / "sdist-vllm-x"
    (tmp_path / "MOUNT").mkdir()
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        mounted = os.fspath(path) == os.fspath(tmp_path / "MOUNT")
        return real_stat(tree if mounted else path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    path = tmp_path / where
    before = tree_digest(tmp_path)
    assert cli.main([*argv, str(path)]) == 11
    assert capsys.readouterr().err == (
        f"error: {option}{path} is inside the harness cache's {cache / 'trees'}, "
        f"whose trees every run reads as they were made; no verb writes there: "
        f"give a path outside it\n"
    )
    assert changed(before, tree_digest(tmp_path)) == []


@pytest.mark.hostile
@pytest.mark.parametrize("module", ["harness.verbs.test", "harness.engine.e2e"])
@pytest.mark.hostile
def test_a_report_inside_the_caches_trees_is_refused(cache, module):
    import importlib

    from harness.errors import OutputError

    _trees(cache)
    report = cache / "trees" / "sdist-vllm-x" / "report.json"
    with pytest.raises(OutputError, match=r"^--report .* is inside the harness "):
        importlib.import_module(module).check_report_path(report)
    assert not report.exists()


def test_the_harness_still_builds_its_own_patched_tree_in_the_cache(
    tmp_path, monkeypatch, cache
):
    from support.series import GOOD_PATCHES, GOOD_SERIES, make_series

    from harness.series.apply import cached_patched_tree

    target = make_series(tmp_path, monkeypatch, GOOD_PATCHES, GOOD_SERIES)
    tree = cached_patched_tree(target, "default")
    assert tree.parent == cache / "patched"
    assert (tree / "vllm" / "events" / "ancestry.py").read_text() == "FILLED = 1\n"


@pytest.mark.hostile
def test_each_checkout_has_its_own_reports_and_logs(cache_dir, tmp_path, monkeypatch):
    from harness import checkout

    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "one")
    places = {}
    for name in ("one", "two", "link"):
        monkeypatch.setattr(checkout, "root", lambda name=name: tmp_path / name)
        places[name] = (cache.report("t", "default", "ci"), cache.log("t-ci-pristine"))
    assert places["one"] == places["link"]  # the checkout's real path
    assert places["one"][0] != places["two"][0]
    assert places["one"][1] != places["two"][1]
    for report, log in places.values():
        assert report.is_relative_to(cache_dir / "checkouts")
        assert report.parent.parent == log.parent.parent
    monkeypatch.setattr(checkout, "root", lambda: tmp_path / "two")
    assert (cache.claim_checkout_dir() / "checkout").read_text() == (
        f"{tmp_path / 'two'}\n"
    )
