"""Which installed files the overlay replaces, from the patches alone."""

import pytest
from support.trees import diff, make_target, write_tree

from harness.errors import SeriesError
from harness.installed.overlay import check_changes_only, touched_files
from harness.series.model import Series, SeriesEntry


def a_series(tmp_path):
    patches = write_tree(
        tmp_path / "patches",
        {
            "0001.patch": diff("vllm/v1/core/block_pool.py", "a\n", "b\n")
            + diff("tests/v1/core/test_block_pool.py", "a\n", "b\n"),
            "0002.patch": diff("vllm/events/new.py", None, "x = 1\n"),
            "0003.patch": diff("vllm/gone.py", "x\n", None),
            "0004.patch": diff("vllm/p0.py", "a\n", "b\n", ("", "")),
        },
    )
    series = Series(
        patches,
        patches / "series",
        (
            SeriesEntry("0001.patch", 1),
            SeriesEntry("0002.patch", 1),
            SeriesEntry("0003.patch", 1),
            SeriesEntry("0004.patch", 0),
        ),
    )
    return series


def test_touched_files_are_the_vllm_files_the_patches_add_change_or_remove(
    tmp_path,
):
    assert touched_files(a_series(tmp_path)) == [
        "vllm/events/new.py",
        "vllm/gone.py",
        "vllm/p0.py",
        "vllm/v1/core/block_pool.py",
    ]


@pytest.mark.parametrize(
    ("entries", "why"),
    [
        (slice(0, 2), "adds vllm/events/new.py (0002.patch)"),
        (slice(2, 3), "removes vllm/gone.py (0003.patch)"),
    ],
)
def test_a_series_that_adds_or_removes_a_package_file_is_refused(
    tmp_path, entries, why
):
    whole = a_series(tmp_path)
    series = Series(whole.patches_dir, whole.series_file, whole.entries[entries])
    with pytest.raises(SeriesError) as refused:
        check_changes_only(series, make_target(None), "default")
    assert str(refused.value) == (
        f"the default tier of target t {why}; only changed files can be put on "
        f"an installed package"
    )


def test_a_series_that_only_changes_files_is_taken(tmp_path):
    whole = a_series(tmp_path)
    only_changes = (whole.entries[0], whole.entries[3])
    series = Series(whole.patches_dir, whole.series_file, only_changes)
    check_changes_only(series, make_target(None), "default")
