#!/usr/bin/env bash
# The series on a machine with an NVIDIA GPU, against the main target's CUDA
# wheel. Not part of CI: nothing in it runs without a GPU. docs/gpu.md.
#
#   bash scripts/gpu_check.sh [WORKDIR]      (default WORKDIR: .gpu-check)
#
# 1. a venv in WORKDIR with what the harness needs, then the target's CUDA
#    wheel (wheels.gpu in harness/targets.toml: vllm 0.34.0 for main),
#    downloaded and its pinned sha256 checked before pip installs it with the
#    torch it asks for (python -m harness e2e install --wheel gpu);
# 2. the target's pristine tree and default-tier patched tree (harness cache:
#    WORKDIR/cache unless HARNESS_CACHE_DIR is set);
# 3. the end-to-end test, tests/e2e: a tiny model built locally, KV events over
#    loopback ZMQ, the installed package as released and then with the Python
#    files the series touches copied over it (bfloat16);
# 4. the target's upstream selection (upstream_tests in harness/targets.toml),
#    from a copy of each tree's tests/ so that no source tree shadows the
#    installed package: the pristine tests as released, the patched tests with
#    the overlay;
# 5. a summary. Exit 0 when the end-to-end test passed and no upstream test
#    that passed as released fails with the overlay.
#
# GPU_CHECK_TARGET (default main) chooses another target (its wheels.gpu);
# PYTHON the interpreter for the venv.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(realpath -m "${1:-$repo/.gpu-check}")
target=${GPU_CHECK_TARGET:-main}
export HARNESS_CACHE_DIR=${HARNESS_CACHE_DIR:-$work/cache}

step() { printf '\n==> %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

if ! gpus=$(nvidia-smi -L); then
    echo "gpu_check: no NVIDIA GPU visible (nvidia-smi -L failed)" >&2
    exit 2
fi
started=$(date +%s)
mkdir -p "$work"
cd "$repo"

step "venv $work/venv with target $target's CUDA wheel"
"${PYTHON:-python3}" -m venv "$work/venv"
py=$work/venv/bin/python
# The harness with what its e2e check and upstream runs need (pyproject.toml's
# extras); pytest-asyncio and tblib: imported by vLLM's tests/conftest.py; the
# setuptools plugins, cmake and ninja: pip prepares a vLLM sdist's metadata
# when the harness fetches the pristine tree. Then the wheel, hash-checked.
"$py" -m pip install --editable "${repo}[e2e,capture,verdict]" \
    pytest-asyncio tblib setuptools_rust setuptools_scm wheel jinja2 cmake ninja
"$py" -m harness e2e install --target "$target" --wheel gpu

step "pristine and patched trees of target $target"
pristine=$("$py" -m harness fetch --target "$target")
patched=$("$py" -c '
import sys
from harness.series.apply import cached_patched_tree
from harness.targets import get_target
print(cached_patched_tree(get_target(sys.argv[1]), "default"))
' "$target")
# Takes off a series an interrupted run left installed (nothing to do
# otherwise); `install` below refuses a package that is not the target's
# release.
"$py" -m harness uninstall

step "end to end: tests/e2e on the GPU"
e2e_status=0
HARNESS_E2E_TARGET=$target HARNESS_E2E_DTYPE=bfloat16 \
    "$py" -m pytest -p no:cacheprovider -rA tests/e2e || e2e_status=$?

step "upstream selection of target $target"
selection_lines=$("$py" -c '
import sys
from harness.targets import get_target
print("\n".join(get_target(sys.argv[1]).selection("ci")))
' "$target")
mapfile -t selection <<<"$selection_lines"

run_upstream() {  # run_upstream SIDE TREE: the selection from a copy of TREE's tests
    local copy=$work/upstream-$1
    rm -rf "$copy"
    mkdir -p "$copy"
    cp -r "$2/tests" "$2/pyproject.toml" "$copy/"
    (cd "$copy" && "$py" -m pytest -p no:cacheprovider \
        --junitxml="$work/upstream-$1.xml" -o junit_family=xunit1 \
        "${selection[@]}") || true  # failures are compared below
}

run_upstream pristine "$pristine"
trap '"$py" -m harness uninstall' EXIT
"$py" -m harness install --target "$target"
run_upstream patched "$patched"
"$py" -m harness uninstall
trap - EXIT

step "summary"
set +e
"$py" - "$work/upstream-pristine.xml" "$work/upstream-patched.xml" <<'EOF'
import sys
from pathlib import Path

from harness.suites.upstream import read_junit
from harness.verdict import compare, tally

reports = [Path(name) for name in sys.argv[1:3]]
missing = [str(report) for report in reports if not report.is_file()]
if missing:
    sys.exit(f"no upstream outcomes (pytest wrote no {', '.join(missing)})")
pristine, patched = (read_junit(report) for report in reports)
comparison = compare(pristine, patched)
print(f"upstream as released: {tally(pristine)}")
print(f"upstream with overlay: {tally(patched)}")
for title, found in (
    ("regressions", comparison.regressions),
    ("added tests that fail", comparison.failing_added),
    ("failing on both (environment)", comparison.environmental),
):
    print(f"{title}: {len(found)}")
    for test in found:
        print(f"  {test}")
sys.exit(1 if comparison.regressions or comparison.failing_added else 0)
EOF
upstream_status=$?
set -e
{
    echo "gpu: $gpus"
    "$py" -c 'import torch, vllm; print(f"vllm {vllm.__version__}, torch {torch.__version__}")'
    echo "end to end (tests/e2e): $([ "$e2e_status" = 0 ] && echo passed || echo "FAILED ($e2e_status)")"
    echo "upstream selection: $([ "$upstream_status" = 0 ] && echo "no regression" || echo FAILED)"
    echo "wall time: $(($(date +%s) - started)) s"
} | tee "$work/summary.txt"
[ "$e2e_status" = 0 ] && [ "$upstream_status" = 0 ]
