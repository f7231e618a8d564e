"""Workloads in KV-event report mode "full", on stand-ins (the conformance
suite drives real trees: tests/conformance/test_report_mode.py)."""

import random
from types import SimpleNamespace

import pytest

from harness.workloads.drivers import (
    CONFIGS,
    FULL_REPORT_CONFIGS,
    FULL_REPORT_TWINS,
    WORKLOADS,
    in_full_report_mode,
)
from harness.workloads.workloads import report_mode


class PoolWithHits:
    def emit_cached_block_events(self, *args):
        pass


def stand_in_driver(asked: str, pool) -> SimpleNamespace:
    return SimpleNamespace(prompts=SimpleNamespace(report_mode=asked), pool=pool)


def test_a_full_report_config_asks_every_request_for_full_mode():
    config = in_full_report_mode(lambda rng: stand_in_driver("incremental", None))
    assert config(random.Random(0)).prompts.report_mode == "full"


@pytest.mark.parametrize(
    ("asked", "pool", "recorded"),
    [
        ("full", PoolWithHits(), "full"),
        # Before 0.26 the pool announces no hit again, whatever is asked.
        ("full", object(), "incremental"),
        ("incremental", PoolWithHits(), "incremental"),
    ],
)
def test_the_run_records_the_mode_the_tree_honours(asked, pool, recorded):
    assert report_mode(stand_in_driver(asked, pool)) == recorded


def test_every_full_report_config_repeats_an_incremental_config():
    assert set(FULL_REPORT_TWINS.values()) <= set(CONFIGS)
    assert set(FULL_REPORT_CONFIGS).isdisjoint(CONFIGS)
    assert WORKLOADS == {**CONFIGS, **FULL_REPORT_CONFIGS}
