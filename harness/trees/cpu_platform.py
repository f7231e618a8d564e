"""vLLM's CPU platform for a source tree of a release before 0.28.

From 0.28 on, vLLM takes its CPU platform from VLLM_TARGET_DEVICE=cpu. Before,
it takes it only when the installed `vllm` distribution's version contains
"cpu"; a source tree on PYTHONPATH has no distribution at all, so vLLM falls
back to its UnspecifiedPlatform, and every upstream test's teardown fails
(`torch.accelerator.empty_cache()` on a machine without one).

The harness's distribution declares `cpu_platform` below under vLLM's
`vllm.platform_plugins` entry point (pyproject.toml), the mechanism every
release has for out-of-tree platforms. It selects the CPU platform only in
processes whose environment sets CPU_PLATFORM_VARIABLE, which
harness.trees.env sets for such trees alone; everywhere else it declines and
vLLM chooses as it always does. No imports: vLLM loads this module.
"""

import os

CPU_PLATFORM_VARIABLE = "HARNESS_CPU_PLATFORM"


def cpu_platform() -> str | None:
    if os.environ.get(CPU_PLATFORM_VARIABLE) == "1":
        return "vllm.platforms.cpu.CpuPlatform"
    return None
