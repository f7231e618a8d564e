"""Which checkout the harness works on, also where the working directory
was removed."""

import pytest

from harness import checkout
from harness.errors import CheckoutError


@pytest.fixture
def gone(tmp_path, monkeypatch):
    (tmp_path / "gone").mkdir()
    monkeypatch.chdir(tmp_path / "gone")
    (tmp_path / "gone").rmdir()


@pytest.mark.hostile
def test_the_checkout_imported_from_needs_no_working_directory(gone):
    assert (checkout.root() / checkout.PIN_FILE).is_file()


@pytest.mark.hostile
def test_no_checkout_and_no_working_directory_is_one_line(tmp_path, monkeypatch, gone):
    monkeypatch.setattr(checkout, "__file__", str(tmp_path / "harness" / "x.py"))
    with pytest.raises(CheckoutError) as raised:
        checkout.root()
    assert str(raised.value) == (
        "the harness is not run from a checkout of vllm-kv-events-series, and "
        "the working directory to look in cannot be read (No such file or "
        "directory: removed?); run it from a clone of the project"
    )
