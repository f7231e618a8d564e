"""Which installed files the overlay replaces, from the patches alone."""

from support.trees import diff, write_tree

from harness.series.model import Series, SeriesEntry
from harness.series.overlay import touched_files


def test_touched_files_are_the_vllm_files_the_patches_add_or_change(tmp_path):
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
    assert touched_files(series) == [
        "vllm/events/new.py",
        "vllm/p0.py",
        "vllm/v1/core/block_pool.py",
    ]
