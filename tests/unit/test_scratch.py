"""Scratch space, and the places a verb makes: the folders made for an
output are removed again when the verb does not finish, and a path that
cannot be made or looked at is one line."""

import os

import pytest

from harness import scratch
from harness.errors import OutputError


@pytest.fixture
def gone(tmp_path, monkeypatch):
    """A working directory that was removed after the run started in it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gone").mkdir()
    monkeypatch.chdir(tmp_path / "gone")
    (tmp_path / "gone").rmdir()


@pytest.mark.hostile
@pytest.mark.parametrize("stop", [KeyboardInterrupt, OSError])
def test_the_folders_a_block_made_go_when_it_does_not_finish(tmp_path, stop):
    (tmp_path / "kept").mkdir()
    with pytest.raises(stop), scratch.folders(tmp_path / "kept" / "new" / "a" / "b"):
        assert (tmp_path / "kept" / "new" / "a" / "b").is_dir()
        raise stop
    assert list(tmp_path.iterdir()) == [tmp_path / "kept"]
    assert list((tmp_path / "kept").iterdir()) == []


def test_the_folders_a_block_made_stay_when_it_finishes(tmp_path):
    with scratch.folders(tmp_path / "new" / "a"):
        pass
    assert (tmp_path / "new" / "a").is_dir()


def test_a_folder_someone_put_something_in_meanwhile_stays(tmp_path):
    with pytest.raises(KeyboardInterrupt), scratch.folders(tmp_path / "new" / "a"):
        (tmp_path / "new" / "theirs").write_text("someone's")
        raise KeyboardInterrupt
    assert [path.name for path in (tmp_path / "new").iterdir()] == ["theirs"]


@pytest.mark.hostile
@pytest.mark.parametrize(
    "name",
    [("x" * 300,), ("y" * 250,) * 20],
    ids=["name-over-NAME_MAX", "path-over-PATH_MAX"],
)
def test_a_new_path_that_cannot_be_looked_at_is_one_line(tmp_path, name):
    path = tmp_path.joinpath(*name, "out")
    with pytest.raises(OutputError) as raised:
        scratch.new_path(path, "--out")
    assert str(raised.value) == (
        f"cannot make {path}: File name too long"
        if len(name) == 1
        else f"cannot make --out {str(path)[:80]}...: the path is "
        f"{len(str(path))} bytes long, and the system takes paths under 4096"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.hostile
def test_a_relative_path_with_the_working_directory_removed_is_one_line(gone):
    with pytest.raises(OutputError) as raised:
        scratch.absolute("rel/out", "--out")
    assert str(raised.value) == (
        "--out rel/out is relative, and the working directory it would be taken "
        "from cannot be read (No such file or directory: removed?); give an "
        "absolute path, or run from a directory that exists"
    )


def test_an_absolute_path_needs_no_working_directory(gone):
    assert scratch.absolute("/abs/out", "--out") == scratch.Path("/abs/out")
    assert os.path.isabs(scratch.new_path("/nonexistent-dir/out", "--out"))
