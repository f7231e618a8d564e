import shutil
import signal
import subprocess
import tarfile
import threading
import time
from pathlib import Path

import pytest
from support.stopping import (
    WAITING_TOOL,
    checkout_prelude,
    end_group,
    is_running,
    start_harness,
    stop,
    wait_for,
)
from support.trees import (
    make_sdist,
    make_target,
    pip_only_from,
    pip_without_user_configuration,
    sdist_target,
    sha256_of,
    target_table,
    unwritable_directory,
    use_checkout,
    write_pins,
    write_tree,
)

from harness import cli, targets
from harness.errors import CacheError, SourceError
from harness.targets import GitSource, PathSource
from harness.trees.sources import (
    DownloadError,
    cached_pristine_tree,
    pip_download,
    pristine_tree,
)

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


@pytest.mark.hostile
def test_sha_mismatch_is_refused_naming_both_hashes(cache, tmp_path):
    archive = make_sdist(tmp_path / "index", "vllm", "9.9.9", FILES)
    pinned = "0" * 64
    target = sdist_target(archive, sha256=pinned)
    with pytest.raises(SourceError) as refused:
        pristine_tree(target, copying_downloader(archive))
    message = str(refused.value)
    assert pinned in message
    assert sha256_of(archive) in message
    assert "refused before anything in it ran" in message
    assert not list((cache / "trees").iterdir())
    assert not list((cache / "sdists").iterdir())


@pytest.mark.hostile
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
    pip_only_from(monkeypatch, tmp_path / "index")
    tree = pristine_tree(sdist_target(archive))
    assert (tree / "setup.py").read_text() == setup


def test_pip_downloader_failure_is_reported_in_one_line(tmp_path, monkeypatch):
    (tmp_path / "empty-index").mkdir()
    pip_only_from(monkeypatch, tmp_path / "empty-index")
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


# What a hostile sdist's setup.py would do: leave a mark where it can.
SETUP_LEAVING_A_MARK = """\
from pathlib import Path
from setuptools import setup
Path({mark!r}).write_text("setup.py ran")
setup(name="vllm", version="9.9.9")
"""


def local_index(tmp_path, monkeypatch, setup: str):
    """An sdist vllm 9.9.9 in a find-links directory pip is pointed at."""
    archive = make_sdist(tmp_path / "index", "vllm", "9.9.9", {"setup.py": setup})
    pip_only_from(monkeypatch, tmp_path / "index")
    return archive


@pytest.mark.hostile
def test_a_tampered_sdist_is_refused_before_its_setup_py_runs(
    cache, tmp_path, monkeypatch, capsys
):
    mark = tmp_path / "setup-py-ran"
    archive = local_index(
        tmp_path, monkeypatch, SETUP_LEAVING_A_MARK.format(mark=str(mark))
    )
    pinned = "0" * 64
    pins = write_pins(
        tmp_path, target_table(f'{{ sdist = "vllm==9.9.9", sha256 = "{pinned}" }}')
    )
    use_checkout(monkeypatch, pins)
    assert cli.main(["fetch", "--target", "t"]) == SourceError.exit_code
    error = capsys.readouterr().err.splitlines()[-1]
    assert error == (
        f"error: target t: the package index served vllm==9.9.9 with sha256 "
        f"{sha256_of(archive)}, but harness/targets.toml pins {pinned}; refused "
        f"before anything in it ran. Check the index or mirror pip uses "
        f"(PIP_INDEX_URL, PIP_FIND_LINKS, pip.conf), or the pin"
    )
    assert not mark.exists(), "the sdist's setup.py ran before the hash check"
    assert list((cache / "sdists").iterdir()) == []


# An sdist as vLLM's is: setup.py imports torch, pyproject.toml asks for
# build tools the environment lacks.
NEEDS_BUILD_TOOLS = {
    "pyproject.toml": '[build-system]\nrequires = ["cmake>=99", "torch==99.0"]\n'
    'build-backend = "setuptools.build_meta"\n',
    "setup.py": SETUP_LEAVING_A_MARK.replace(
        "from setuptools import setup", "import torch_is_not_here"
    ),
}


@pytest.mark.hostile
@pytest.mark.parametrize("layout", ["pyproject", "setup.py only"])
@pytest.mark.hostile
def test_an_sdist_is_fetched_without_running_anything_in_it(
    cache, tmp_path, monkeypatch, layout
):
    mark = tmp_path / "setup-py-ran"
    files = {
        name: text.format(mark=str(mark)) for name, text in NEEDS_BUILD_TOOLS.items()
    }
    if layout != "pyproject":
        del files["pyproject.toml"]
    archive = make_sdist(tmp_path / "index", "vllm", "9.9.9", files)
    pip_only_from(monkeypatch, tmp_path / "index")
    tree = pristine_tree(sdist_target(archive))
    assert (tree / "setup.py").read_text() == files["setup.py"]
    assert not mark.exists(), "the sdist's setup.py ran"
    assert [path.name for path in (cache / "sdists").iterdir()] == [archive.name]


def test_pip_configuration_files_are_honoured(cache, tmp_path, monkeypatch):
    setup = "from setuptools import setup\nsetup(name='vllm', version='9.9.9')\n"
    archive = make_sdist(tmp_path / "index", "vllm", "9.9.9", {"setup.py": setup})
    config = tmp_path / "pip.conf"
    config.write_text(f"[global]\nno-index = true\nfind-links = {archive.parent}\n")
    pip_without_user_configuration(monkeypatch)  # PIP_FIND_LINKS would win
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path / "no-site-configuration"))
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    tree = pristine_tree(sdist_target(archive))
    assert (tree / "setup.py").read_text() == setup


@pytest.mark.hostile
def test_a_cached_sdist_that_no_longer_matches_is_quarantined_and_fetched_again(
    cache, tmp_path, capsys
):
    archive = make_sdist(tmp_path / "index", "vllm", "9.9.9", FILES)
    (cache / "sdists").mkdir(parents=True)
    corrupt = cache / "sdists" / archive.name
    corrupt.write_bytes(archive.read_bytes()[:-100])
    corrupt_sha = sha256_of(corrupt)
    download = copying_downloader(archive)
    tree = pristine_tree(sdist_target(archive), download)
    assert (tree / "vllm" / "__init__.py").read_text() == "VERSION = 1\n"
    assert len(download.calls) == 1
    assert sha256_of(corrupt) == sha256_of(archive)
    quarantined = cache / "quarantine" / f"{archive.name}.{corrupt_sha}"
    assert quarantined.is_file()
    assert (
        f"warning: the cached {corrupt} has sha256 {corrupt_sha}, "
        f"not the pinned {sha256_of(archive)}; moved it to {quarantined}\n"
    ) in capsys.readouterr().err


@pytest.mark.hostile
@pytest.mark.parametrize(
    "content",
    [b"", b"this is not a tar archive\n" * 40, "truncated"],
    ids=["empty", "garbage", "truncated"],
)
@pytest.mark.hostile
def test_a_broken_archive_whose_hash_matches_is_one_line(
    cache, tmp_path, monkeypatch, capsys, content
):
    good = make_sdist(tmp_path / "index", "vllm", "9.9.9", FILES)
    broken = cache / "sdists" / good.name
    broken.parent.mkdir(parents=True)
    data = good.read_bytes()[: len(good.read_bytes()) // 2]
    broken.write_bytes(data if content == "truncated" else content)
    pins = write_pins(
        tmp_path,
        target_table(f'{{ sdist = "vllm==9.9.9", sha256 = "{sha256_of(broken)}" }}'),
    )
    use_checkout(monkeypatch, pins)
    assert cli.main(["fetch", "--target", "t"]) == SourceError.exit_code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: target t: {broken} is not a readable .tar.gz (")
    assert line.endswith(
        "although its sha256 is the pinned one: the pin in harness/targets.toml "
        "names a broken file"
    )
    assert list((cache / "trees").iterdir()) == []


@pytest.mark.hostile
def test_a_cache_that_is_a_file_is_one_line(tmp_path, monkeypatch, capsys):
    archive = make_sdist(tmp_path / "index", "vllm", "9.9.9", FILES)
    not_a_directory = tmp_path / "cache-file"
    not_a_directory.write_text("")
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(not_a_directory))
    with pytest.raises(CacheError) as refused:
        pristine_tree(sdist_target(archive), copying_downloader(archive))
    assert str(refused.value).startswith(
        f"cannot write to the harness cache {not_a_directory}: Not a directory"
    )
    assert str(refused.value).endswith("set HARNESS_CACHE_DIR to a writable directory")


@pytest.mark.hostile
def test_an_unwritable_cache_is_one_line(tmp_path, monkeypatch, capsys):
    archive = make_sdist(tmp_path / "index", "vllm", "9.9.9", FILES)
    cache_dir = unwritable_directory(tmp_path) / "cache"
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(cache_dir))
    pins = write_pins(
        tmp_path,
        target_table(f'{{ sdist = "vllm==9.9.9", sha256 = "{sha256_of(archive)}" }}'),
    )
    use_checkout(monkeypatch, pins)
    assert cli.main(["fetch", "--target", "t"]) == CacheError.exit_code
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: cannot write to the harness cache {cache_dir}: ")


def test_lint_can_have_a_tree_from_a_cached_sdist_without_a_download(cache, tmp_path):
    archive = make_sdist(tmp_path / "index", "vllm", "9.9.9", FILES)
    target = sdist_target(archive)
    assert cached_pristine_tree(target) is None
    (cache / "sdists").mkdir(parents=True)
    shutil.copy(archive, cache / "sdists" / archive.name)
    tree = cached_pristine_tree(target)
    assert (tree / "tests" / "test_a.py").is_file()


# In the harness child: a download that writes part of the sdist, then runs a
# stand-in tool that waits (support.stopping.WAITING_TOOL).
WAITING_DOWNLOAD = """
from harness import processes
from harness.trees import sources
def waiting_download(source, dest_dir):
    (dest_dir / "vllm-9.9.9.tar.gz").write_bytes(b"the first bytes")
    processes.run([{tool!r}])
sources.pip_download = waiting_download
"""


def start_waiting_fetch(tmp_path, cache, archive):
    tool = tmp_path / "waiting-tool"
    tool.write_text(WAITING_TOOL)
    tool.chmod(0o755)
    pins = write_pins(
        tmp_path,
        target_table(f'{{ sdist = "vllm==9.9.9", sha256 = "{sha256_of(archive)}" }}'),
    )
    ready, pid_file = tmp_path / "ready", tmp_path / "pid"
    process = start_harness(
        ["fetch", "--target", "t"],
        prelude=checkout_prelude(pins.parent.parent)
        + WAITING_DOWNLOAD.format(tool=str(tool)),
        env={
            "HARNESS_CACHE_DIR": str(cache),
            "HARNESS_TEST_READY": str(ready),
            "HARNESS_TEST_PID": str(pid_file),
        },
    )
    wait_for(ready, process)
    return process, int(pid_file.read_text())


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("signum", "status", "line"),
    [
        (signal.SIGINT, 130, "error: interrupted (Ctrl-C)"),
        (signal.SIGTERM, 143, "error: terminated (SIGTERM)"),
        (signal.SIGHUP, 129, "error: hung up (the terminal closed)"),
    ],
    ids=["SIGINT", "SIGTERM", "SIGHUP"],
)
@pytest.mark.hostile
def test_a_stopped_fetch_ends_its_download_and_leaves_no_scratch(
    cache, tmp_path, signum, status, line
):
    archive = make_sdist(tmp_path / "index", "vllm", "9.9.9", FILES)
    process, tool_pid = start_waiting_fetch(tmp_path, cache, archive)
    result = stop(process, signum)
    assert result.returncode == status
    assert result.stderr.splitlines() == [
        "harness: fetching vllm==9.9.9 through pip",
        line,
    ]
    assert not is_running(tool_pid), "the download's child outlived the harness"
    assert list((cache / "sdists").iterdir()) == []


@pytest.mark.hostile
def test_what_a_killed_fetch_leaves_is_swept_by_the_next_run(cache, tmp_path, capsys):
    archive = make_sdist(tmp_path / "index", "vllm", "9.9.9", FILES)
    process, tool_pid = start_waiting_fetch(tmp_path, cache, archive)
    process.kill()
    process.communicate()
    end_group(tool_pid)
    [left] = (cache / "sdists").iterdir()
    assert left.name.startswith(".harness-scratch-download-")
    tree = pristine_tree(sdist_target(archive), copying_downloader(archive))
    assert (tree / "vllm" / "__init__.py").is_file()
    assert not left.exists()
    assert [path.name for path in (cache / "sdists").iterdir()] == [archive.name]
    assert (
        f"harness: removed {left}, left behind by an earlier run that was killed\n"
        in capsys.readouterr().err
    )


@pytest.mark.hostile
@pytest.mark.parametrize("removed", ["tests/test_a.py", "tests"])
def test_a_tree_damaged_while_it_unpacks_is_never_cached(
    cache, tmp_path, monkeypatch, capsys, removed
):
    """Files removed from the unpack scratch while it unpacks (an rm -rf in
    the cache): the tree is not renamed into place, and the next fetch
    unpacks it whole."""
    archive = make_sdist(tmp_path / "index", "vllm", "9.9.9", FILES)
    use_checkout(monkeypatch, write_pins(tmp_path, target_table(
        f'{{ sdist = "vllm==9.9.9", sha256 = "{sha256_of(archive)}" }}'
    )))  # fmt: skip
    (cache / "sdists").mkdir(parents=True)
    shutil.copy(archive, cache / "sdists" / archive.name)
    extract = tarfile.TarFile.extractall

    def damaged(tar, path, *args, **kwargs):
        extract(tar, path, *args, **kwargs)
        victim = next(Path(path).iterdir()) / removed
        shutil.rmtree(victim) if victim.is_dir() else victim.unlink()

    monkeypatch.setattr(tarfile.TarFile, "extractall", damaged)
    assert cli.main(["fetch", "--target", "t"]) == SourceError.exit_code
    [line] = capsys.readouterr().err.splitlines()[-1:]
    assert line == (
        f"error: target t: 1 of the 2 members of {archive.name} are not in its "
        f"unpacked tree as the archive lists them (vllm-9.9.9/tests/test_a.py): "
        f"something changed the cache's unpack directory meanwhile; nothing was "
        f"cached: fetch again"
    )
    assert list((cache / "trees").iterdir()) == []
    monkeypatch.setattr(tarfile.TarFile, "extractall", extract)
    assert cli.main(["fetch", "--target", "t"]) == 0
    [tree] = (cache / "trees").iterdir()
    assert (tree / "tests/test_a.py").is_file()
