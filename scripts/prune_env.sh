#!/usr/bin/env bash
# Remove a verdict's tox environment once its verdict is taken, when
# HARNESS_PRUNE_ENVS=1: tox.ini's [verdict] runs it as commands_post, so
# `HARNESS_PRUNE_ENVS=1 tox -m matrix` keeps one vLLM environment (about
# 3 GB) on disk at a time instead of one per target and tier. tox makes the
# environment again on its next run. Runs as bash, not as the environment's
# Python, so nothing runs from the directory it removes.
#
#   scripts/prune_env.sh ENV_DIR
#
# Exit codes: 0 removed, or kept because HARNESS_PRUNE_ENVS is not 1;
# 2 ENV_DIR is not a virtual environment (no pyvenv.cfg): nothing removed.
set -euo pipefail

env_dir=${1:?usage: scripts/prune_env.sh ENV_DIR}
if [[ ${HARNESS_PRUNE_ENVS:-} != 1 ]]; then
    exit 0
fi
if [[ ! -f $env_dir/pyvenv.cfg ]]; then
    echo "prune_env: $env_dir is not a virtual environment (no pyvenv.cfg); not removed" >&2
    exit 2
fi
size=$(du -sh -- "$env_dir" | cut -f1)
rm -rf -- "$env_dir"
echo "prune_env: removed $env_dir ($size; HARNESS_PRUNE_ENVS=1)"
