"""What a verdict was judged on: the tier's series and the harness code, so
that a verdict is quoted only on the tree it judged."""

import pytest
from support.export import make_target
from support.trees import write_tree

from harness.series.judged import code_digest, not_of_tree, tree_key


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    make_target(tmp_path, monkeypatch)
    write_tree(tmp_path / "tests" / "conformance", {"test_suite.py": "x = 1\n"})
    return tmp_path


def test_the_key_changes_with_the_series_and_the_suite_not_with_the_docs(checkout):
    from harness.targets import get_target

    def key():
        return tree_key(get_target("t"), "default")

    first = key()
    write_tree(checkout, {"docs/a-page.txt": "more\n", "README.md": "more\n"})
    assert key() == first
    write_tree(checkout / "patches", {"alternatives/x.patch": "not a tier\n"})
    assert key() == first
    write_tree(checkout / "tests" / "conformance", {"test_suite.py": "x = 2\n"})
    assert key()["harness_sha256"] != first["harness_sha256"]
    assert key()["series_sha256"] == first["series_sha256"]
    patch = next((checkout / "patches").glob("0001-*.patch"))
    patch.write_text(patch.read_text() + "\n")
    assert key()["series_sha256"] != first["series_sha256"]


def test_the_harness_digest_is_of_the_code_that_runs(checkout):
    assert code_digest() == code_digest()
    assert len(code_digest()) == 64


@pytest.mark.parametrize(
    ("recorded", "why"),
    [
        ({"series_sha256": "s", "harness_sha256": "h"}, None),
        ({}, "it records no digest of its series and harness (an older verdict)"),
        ({"series_sha256": "s", "harness_sha256": 5}, "it records no digest"),
        (
            {"series_sha256": "x", "harness_sha256": "h"},
            "its series file or patches differ from this checkout's",
        ),
        (
            {"series_sha256": "s", "harness_sha256": "x"},
            "the harness code that judged it differs from this checkout's",
        ),
    ],
    ids=["same", "none", "not-a-string", "other-series", "other-harness"],
)
def test_a_verdict_is_of_this_tree_only_when_both_digests_match(recorded, why):
    found = not_of_tree(recorded, {"series_sha256": "s", "harness_sha256": "h"})
    assert found == why or (why and found.startswith(why))
