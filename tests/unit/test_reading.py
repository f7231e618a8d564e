"""The one bounded reader: a file that is not a regular file is refused at
once, never waited on; one larger than its bound is read no further."""

import os
import socket
import time

import pytest
from support.files import fifo_that_ends, sparse_file

from harness.reading import (
    Refused,
    bounded_lines,
    open_regular,
    read_bounded,
    size_in_words,
)

pytestmark = pytest.mark.hostile


def a_socket(path):
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(path))
    return path


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (fifo_that_ends, "a FIFO"),
        (lambda path: path.mkdir(), "a directory"),
        (lambda path: path.symlink_to("/dev/zero"), "a character device"),
    ],
    ids=["a-fifo", "a-directory", "a-link-to-dev-zero"],
)
def test_what_is_not_a_regular_file_is_refused_at_once(tmp_path, make, kind):
    path = tmp_path / "file"
    make(path)
    started = time.monotonic()
    with pytest.raises(Refused) as refused:
        read_bounded(path, 100)
    assert str(refused.value) == f"{kind}, not a regular file"
    assert time.monotonic() - started < 2  # a FIFO is let go after 5 s


def test_a_socket_cannot_be_opened_at_all(tmp_path):
    with pytest.raises(OSError):
        read_bounded(a_socket(tmp_path / "socket"), 100)


def test_a_link_is_not_followed_when_the_caller_says_so(tmp_path):
    (tmp_path / "real").write_bytes(b"data")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert read_bounded(tmp_path / "link", 100) == b"data"
    with pytest.raises(OSError):
        read_bounded(tmp_path / "link", 100, follow_links=False)


def test_a_file_up_to_its_bound_is_read_one_past_it_is_refused(tmp_path):
    path = tmp_path / "file"
    path.write_bytes(b"x" * 100)
    assert read_bounded(path, 100) == b"x" * 100
    with pytest.raises(Refused) as refused:
        read_bounded(path, 99, what="receipt")
    assert str(refused.value) == "larger than 99 bytes, which no receipt is"


def test_a_sparse_file_of_gigabytes_is_read_no_further_than_its_bound(tmp_path):
    path = sparse_file(tmp_path / "huge")
    with pytest.raises(Refused) as refused:
        read_bounded(path, 1 << 20, what="report")
    assert str(refused.value) == "larger than 1 MiB, which no report is"


def test_the_descriptor_is_closed_when_a_file_is_refused(tmp_path):
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        with pytest.raises(Refused):
            read_bounded(tmp_path, 100)
    assert len(os.listdir("/proc/self/fd")) == before


def test_lines_are_bounded_in_length_and_in_number(tmp_path):
    path = tmp_path / "lines"
    path.write_bytes(b"1\n22\n333\n")
    with open_regular(path) as stream:
        assert list(bounded_lines(stream, 3, 2)) == [b"1\n", b"22\n"]
    with open_regular(path) as stream, pytest.raises(Refused) as refused:
        list(bounded_lines(stream, 2, 10))
    assert str(refused.value) == "line 3 is longer than 2 bytes"


def test_an_endless_line_is_read_no_further_than_its_bound(tmp_path):
    with open_regular(sparse_file(tmp_path / "zeros")) as stream:
        with pytest.raises(Refused):
            next(bounded_lines(stream, 64, 10))
        assert stream.tell() == 65


@pytest.mark.parametrize(
    ("limit", "words"),
    [(64 << 20, "64 MiB"), (1 << 30, "1 GiB"), (1000, "1000 bytes"), (4096, "4 KiB")],
)
def test_sizes_are_said_in_the_largest_whole_unit(limit, words):
    assert size_in_words(limit) == words
