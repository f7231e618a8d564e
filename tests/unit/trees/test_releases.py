"""`targets --newer`: the vLLM releases on the index newer than every target."""

import os
import sys

import pytest
from support.trees import (
    make_sdist,
    make_target,
    sha256_of,
    target_table,
    use_checkout,
    write_pins,
)

from harness import cli
from harness.errors import IndexUnreachable
from harness.targets import PathSource, SdistSource
from harness.trees import releases
from harness.trees.releases import final_key, newest_pinned

# What setup.py would do if anything in the sdist ran.
SETUP = "from pathlib import Path\nPath({mark!r}).write_text('setup.py ran')\n"


def local_index(tmp_path, monkeypatch, versions) -> dict:
    """A find-links directory of vllm sdists, the only index pip asks."""
    mark = tmp_path / "setup-py-ran"
    archives = {
        version: make_sdist(
            tmp_path / "index",
            "vllm",
            version,
            {"setup.py": SETUP.format(mark=str(mark))},
        )
        for version in versions
    }
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # the machine's pip.conf
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "index"))
    return archives


def pin(tmp_path, monkeypatch, version: str) -> None:
    source = f'{{ sdist = "vllm=={version}", sha256 = "{"0" * 64}" }}'
    use_checkout(monkeypatch, write_pins(tmp_path, target_table(source)))


@pytest.mark.parametrize(
    ("version", "key"),
    [
        ("0.34.0", ((0, 34), -1)),
        ("0.34", ((0, 34), -1)),
        ("0.8.5.post1", ((0, 8, 5), 1)),
        ("0.10.1.1", ((0, 10, 1, 1), -1)),
        ("0.35.0rc1", None),
        ("0.35.0.dev3", None),
        ("0.35.0a1", None),
        ("0.34.0+cpu", None),
    ],
)
def test_final_releases_have_a_key_and_others_none(version, key):
    assert final_key(version) == key


def test_the_newest_pinned_release_is_found_by_version_not_by_name():
    targets = [
        make_target(SdistSource("vllm", "0.9.2", "0" * 64), name="old"),
        make_target(SdistSource("vllm", "0.10.0", "0" * 64), name="main"),
        make_target(SdistSource("other", "9.0.0", "0" * 64), name="other"),
        make_target(PathSource("/nowhere"), name="local"),
    ]
    assert newest_pinned(targets, "vllm") == ("0.10.0", "main")
    assert newest_pinned(targets[3:], "vllm") is None


def test_newer_final_releases_are_printed_with_the_sha256_to_pin(
    tmp_path, temporary, cache, monkeypatch, capsys
):
    archives = local_index(
        tmp_path, monkeypatch, ["9.9.9", "10.0.0", "10.0.0.post1", "10.1.0rc1"]
    )
    pin(tmp_path, monkeypatch, "9.9.9")
    assert cli.main(["targets", "--newer"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        f'vllm {version}: source = {{ sdist = "vllm=={version}", sha256 = '
        f'"{sha256_of(archives[version])}" }}'
        for version in ("10.0.0", "10.0.0.post1")
    ]
    assert not (tmp_path / "setup-py-ran").exists(), "something in an sdist ran"
    assert not cache.exists(), "the downloads are not pinned: not in the cache"
    assert list(temporary.iterdir()) == []


def test_none_newer_is_one_line(tmp_path, temporary, cache, monkeypatch, capsys):
    local_index(tmp_path, monkeypatch, ["9.9.9", "10.0.0rc1"])
    pin(tmp_path, monkeypatch, "9.9.9")
    assert cli.main(["targets", "--newer"]) == 0
    assert capsys.readouterr().out == (
        "no vLLM release on the package index is newer than 9.9.9 (target t's)\n"
    )


def test_an_index_that_cannot_be_asked_is_one_line(
    tmp_path, temporary, monkeypatch, capsys
):
    local_index(tmp_path, monkeypatch, [])
    pin(tmp_path, monkeypatch, "9.9.9")
    assert cli.main(["targets", "--newer"]) == IndexUnreachable.exit_code
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(
        "error: the package index cannot be asked: pip, asked to list the "
        "versions of vllm, exited 1: ERROR: "
    )


def test_a_pip_that_does_not_answer_is_ended_at_its_bound(
    tmp_path, temporary, monkeypatch, capsys
):
    monkeypatch.setattr(
        releases, "PIP", [sys.executable, "-c", "import time\ntime.sleep(60)"]
    )
    monkeypatch.setattr(releases, "INDEX_TIMEOUT_S", 0.5)
    pin(tmp_path, monkeypatch, "9.9.9")
    assert cli.main(["targets", "--newer"]) == IndexUnreachable.exit_code
    [line] = capsys.readouterr().err.splitlines()
    assert line.endswith("did not finish within 0.5 s; it was ended")


def test_newer_goes_alone(tmp_path, monkeypatch, capsys):
    pin(tmp_path, monkeypatch, "9.9.9")
    with pytest.raises(SystemExit) as stopped:
        cli.main(["targets", "--newer", "--tests", "t"])
    assert stopped.value.code == 2
    assert "--newer does not go with --tests" in capsys.readouterr().err
