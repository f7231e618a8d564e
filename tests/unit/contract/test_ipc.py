"""An ipc:// path is bound only where binding takes nothing from anyone:
libzmq deletes what is at the path before it binds."""

import os
import socket

import pytest
from support.cli import harness

from harness.contract.ipc import check_ipc_bind
from harness.errors import SubscriptionError

pytestmark = pytest.mark.hostile


def refused(path) -> str:
    with pytest.raises(SubscriptionError) as raised:
        check_ipc_bind(f"ipc://{path}")
    assert "\n" not in str(raised.value)
    return str(raised.value)


@pytest.fixture(autouse=True)
def place(tmp_path, cache):
    """The test's directory, with a harness cache of its own in it."""
    return tmp_path


def test_a_file_is_refused_and_kept(place):
    notes = place / "notes.txt"
    notes.write_text("my notes")
    assert refused(notes).endswith(
        f"{notes} is a file, and binding an ipc path deletes what is there "
        f"first; give a path where nothing is"
    )
    assert notes.read_text() == "my notes"


def test_a_symlink_is_refused_whatever_it_leads_to(place):
    stale = place / "stale.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as unix:
        unix.bind(str(stale))  # a socket nobody listens on: bindable itself
    link = place / "link"
    link.symlink_to(stale)
    assert f"{link} is a symlink, and binding" in refused(link)
    assert link.is_symlink()


def test_a_directory_is_refused(place):
    assert f"{place} is a directory, and binding" in refused(place)


def test_a_socket_another_process_listens_on_is_refused(place):
    live = place / "live.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as unix:
        unix.bind(str(live))
        unix.listen(1)
        assert f"{live} is a socket another process listens on" in refused(live)


def test_a_socket_a_bind_left_and_a_free_path_are_bound(place):
    stale = place / "stale.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as unix:
        unix.bind(str(stale))
    check_ipc_bind(f"ipc://{stale}")
    check_ipc_bind(f"ipc://{place / 'new.sock'}")


@pytest.mark.parametrize(
    "endpoint", ["ipc://*", "ipc://@abstract-name", "tcp://127.0.0.1:5557"]
)
def test_endpoints_without_a_file_are_not_ipc_paths(endpoint):
    check_ipc_bind(endpoint)


def test_a_path_inside_the_cache_is_refused_even_where_nothing_is(cache):
    tree = cache / "trees" / "t"
    tree.mkdir(parents=True)
    (tree / "file.py").write_text("pristine")
    for path in (tree / "file.py", tree / "new.sock"):
        assert f"{path} lies inside the harness cache {cache}" in refused(path)
    assert (tree / "file.py").read_text() == "pristine"


def test_a_directory_that_is_the_caches_under_another_name_is_refused(
    place, cache, monkeypatch
):
    """A bind mount of a cache directory (root only): the same device and
    inode under another path, which no resolved path shows."""
    tree = cache / "trees" / "t"
    tree.mkdir(parents=True)
    mounted = place / "mnt"
    mounted.mkdir()
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        return real_stat(tree if str(path) == str(mounted) else path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    assert f"lies inside the harness cache {cache}" in refused(mounted / "x.sock")


def test_a_path_too_long_to_bind_is_refused_before_the_bind_deletes_it(place):
    deep = place / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    kept = deep / "kept.txt"
    kept.write_text("kept")
    assert "the path is longer than 107 bytes" in refused(kept)
    assert kept.read_text() == "kept"


@pytest.mark.parametrize("verb", ["check-stream", "capture"])
def test_listen_on_a_users_file_leaves_it_as_it_was(tmp_path, verb):
    """The file is the user's: refused in one line before the bind, kept."""
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    command = [verb, "--listen", f"ipc://{notes}", "--timeout", "1"]
    if verb == "capture":
        command += ["--out", str(tmp_path / "kv.bin")]
    result = harness(*command)
    assert result.returncode == SubscriptionError.exit_code, result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert line == (
        f"error: ipc://{notes}: {notes} is a file, and binding an ipc path "
        f"deletes what is there first; give a path where nothing is"
    )
    assert notes.read_text() == "my notes"
    assert list(tmp_path.iterdir()) == [notes]
