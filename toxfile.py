"""tox plugin: one environment per target and tier of harness/targets.toml.

`vllm-TARGET` (default tier) and `vllm-TARGET-TIER` are made from tox.ini's
[verdict] section, `vllm-TARGET-gpu` from its [gpu-check] section; each gets
the target (and tier, or wheel) in its set_env. Adding a target to
harness/targets.toml adds its environments; tox.ini names no target.
"""

import sys
from pathlib import Path

from tox.config.loader.memory import MemoryLoader
from tox.plugin import impl

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))  # the harness of this checkout; stdlib only here

from harness.targets import load_targets  # noqa: E402
from harness.verbs.ci import tox_environments  # noqa: E402

del sys.path[0]
ENVIRONMENTS = tox_environments(load_targets(ROOT / "harness" / "targets.toml"))


@impl
def tox_extend_envs():
    return list(ENVIRONMENTS)


@impl
def tox_add_core_config(core_conf, state):
    for name, (section, set_env) in ENVIRONMENTS.items():
        loader = MemoryLoader(base=[section, "testenv"], set_env=set_env)
        state.conf.memory_seed_loaders[name].append(loader)
