import shutil
import subprocess
import threading
import time

import pytest
from support.trees import (
    make_sdist,
    make_target,
    sdist_target,
    sha256_of,
    target_table,
    use_checkout,
    write_pins,
    write_tree,
)

from harness import cli, targets
from harness.errors import SourceError
from harness.targets import GitSource, PathSource
from harness.trees.sources import DownloadError, pip_download, pristine_tree

FILES = {"vllm/__init__.py": "VERSION = 1\n", "tests/test_a.py": "def test_a(): pass\n"}


def copying_downloader(archive):
    calls = []

    def download(source, dest_dir):
        calls.append(source)
        shutil.copy(archive, dest_dir / archive.name)

    download.calls = calls
    return download


def offline_downloader(source, dest_dir):
    raise DownloadError("pip download exited 1: ERROR: no network")


def test_sdist_is_fetched_verified_and_unpacked_once(cache, tmp_path):
    archive = make_sdist(tmp_path / "index", "vllm", "9.9.9", FILES)
    target = sdist_target(archive)
    download = copying_downloader(archive)
    tree = pristine_tree(target, download)
    assert (tree / "vllm" / "__init__.py").read_text() == "VERSION = 1\n"
    assert tree.is_relative_to(cache)
    assert pristine_tree(target, offline_downloader) == tree
    assert len(download.calls) == 1


def test_warm_sdist_cache_is_unpacked_again_without_network(cache, tmp_path):
    archive = make_sdist(tmp_path / "index", "vllm", "9.9.9", FILES)
    target = sdist_target(archive)
    tree = pristine_tree(target, copying_downloader(archive))
    shutil.rmtree(tree)
    assert pristine_tree(target, offline_downloader) == tree
    assert (tree / "tests" / "test_a.py").is_file()


def test_sha_mismatch_is_refused_naming_both_hashes(cache, tmp_path):
    archive = make_sdist(tmp_path / "index", "vllm", "9.9.9", FILES)
    pinned = "0" * 64
    target = sdist_target(archive, sha256=pinned)
    with pytest.raises(SourceError) as refused:
        pristine_tree(target, copying_downloader(archive))
    message = str(refused.value)
    assert pinned in message
    assert sha256_of(archive) in message
    assert "refusing to unpack" in message
    assert not list((cache / "trees").iterdir())
    assert not list((cache / "sdists").iterdir())


def test_sdist_with_unsafe_member_is_not_unpacked_outside_the_cache(cache, tmp_path):
    archive = make_sdist(
        tmp_path / "index", "vllm", "9.9.9", {"../../escaped.txt": "boo\n"}
    )
    with pytest.raises(SourceError, match="has an unsafe member .*outside the dest"):
        pristine_tree(sdist_target(archive), copying_downloader(archive))
    assert not (tmp_path / "escaped.txt").exists()


def test_cold_cache_offline_gives_one_line_naming_target_and_remedy(
    cache, tmp_path, monkeypatch, capsys
):
    pins = write_pins(
        tmp_path, target_table(f'{{ sdist = "vllm==9.9.9", sha256 = "{"0" * 64}" }}')
    )
    use_checkout(monkeypatch, pins)
    monkeypatch.setattr("harness.trees.sources.pip_download", offline_downloader)
    assert cli.main(["fetch", "--target", "t"]) == SourceError.exit_code
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "harness: fetching vllm==9.9.9 through pip"
    assert len(lines) == 2
    assert lines[1].startswith(
        "error: target t: cannot fetch vllm==9.9.9 into the cold"
    )
    assert "PIP_INDEX_URL" in lines[1]


def test_pip_downloader_fetches_an_sdist_from_a_local_index(
    cache, tmp_path, monkeypatch
):
    setup = "from setuptools import setup\nsetup(name='vllm', version='9.9.9')\n"
    archive = make_sdist(tmp_path / "index", "vllm", "9.9.9", {"setup.py": setup})
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "index"))
    tree = pristine_tree(sdist_target(archive))
    assert (tree / "setup.py").read_text() == setup


def test_pip_downloader_failure_is_reported_in_one_line(tmp_path, monkeypatch):
    (tmp_path / "empty-index").mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "empty-index"))
    target = make_target(targets.SdistSource("vllm", "9.9.9", "0" * 64))
    with pytest.raises(DownloadError) as failed:
        pip_download(target.source, tmp_path / "out")
    assert "\n" not in str(failed.value)
    assert str(failed.value).endswith(
        ": ERROR: No matching distribution found for vllm==9.9.9"
    )


def test_parallel_fetches_share_one_download(cache, tmp_path):
    archive = make_sdist(tmp_path / "index", "vllm", "9.9.9", FILES)
    target = sdist_target(archive)
    copy = copying_downloader(archive)

    def slow_download(source, dest_dir):
        time.sleep(0.3)
        copy(source, dest_dir)

    trees = []
    threads = [
        threading.Thread(
            target=lambda: trees.append(pristine_tree(target, slow_download))
        )
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(trees)) == 1
    assert len(copy.calls) == 1


def git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_git_source_checks_out_the_pinned_commit(cache, tmp_path):
    repo = write_tree(tmp_path / "upstream", {"vllm/a.py": "first\n"})
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", ".", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one", cwd=repo)
    pinned = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True
    ).stdout.strip()
    (repo / "vllm" / "a.py").write_text("second\n")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two", cwd=repo)
    tree = pristine_tree(make_target(GitSource(str(repo), pinned)))
    assert (tree / "vllm" / "a.py").read_text() == "first\n"
    assert not (tree / ".git").exists()
    assert tree.name == f"git-{pinned}"


def test_unreachable_git_source_gives_one_line(cache, tmp_path):
    target = make_target(GitSource(str(tmp_path / "missing.git"), "a" * 40))
    with pytest.raises(SourceError) as failed:
        pristine_tree(target)
    assert "\n" not in str(failed.value)
    assert str(failed.value).startswith(f"target t: cannot get commit {'a' * 40}")


def test_path_source_is_used_in_place(tmp_path):
    tree = write_tree(tmp_path / "checkout", FILES)
    assert pristine_tree(make_target(PathSource(tree))) == tree
    with pytest.raises(SourceError, match="is not a directory"):
        pristine_tree(make_target(PathSource(tmp_path / "nowhere")))
