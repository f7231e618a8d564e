"""The pristine and patched trees' workloads, fed to Dynamo once per session.

The trees come from the harness cache (`harness.trees.sources.pristine_tree`,
`harness.series.apply.cached_patched_tree`) for the target named by HARNESS_TARGET
(default: main), so a warm cache needs no network.
"""

import os

import pytest

from harness.routers import DEFAULT_OPS, DEFAULT_SEEDS
from harness.routers.replay import compare
from harness.targets import TIERS, Target, get_target


@pytest.fixture(scope="session")
def target() -> Target:
    return get_target(os.environ.get("HARNESS_TARGET", "main"))


@pytest.fixture(scope="session")
def comparisons(target):
    return {
        comparison.tier: comparison
        for comparison in compare(target.name, TIERS, DEFAULT_SEEDS, DEFAULT_OPS)
    }
