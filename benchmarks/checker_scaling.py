"""How check-stream's cost and memory grow with the violations and the views
of a stream.

    python benchmarks/checker_scaling.py [--against CHECKOUT] [--repeats 3]
        [--json FILE]

Three figures, each for this checkout and, with ``--against``, for another
checkout of this project (say the main branch's), side by side in one run:

- CPU time of ``StreamChecker.apply`` on one batch of N stores whose parent
  was never stored (N violations of C1), N = 5,000 to 40,000, median of
  ``--repeats``; the ratio of each time to that of half as many events is 2
  for a cost linear in the batch, 4 for a quadratic one;
- CPU time of check-stream's file check and report (``check_file``, then
  ``format_report``) on a capture of V views, one ``group_idx`` per store
  (V = 2,500 to 20,000), each store a violation, median of ``--repeats``;
  the same ratios, linear against quadratic in the number of views;
- peak memory (max RSS) of ``python -m harness check-stream FILE`` on
  captures of about 10, 20 and 40 MB that are all violations: flat when the
  input is read a chunk at a time and only a few witnesses per rule are
  kept, growing with the file otherwise.

Each measure runs in a child process with the checkout first on its path.
No figure is asserted; the script only prints.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import benchlib

HERE = Path(__file__).resolve().parents[1]
BATCH_SIZES = (5_000, 10_000, 20_000, 40_000)
VIEW_COUNTS = (2_500, 5_000, 10_000, 20_000)
CAPTURE_MB = (10, 20, 40)

# In the child: time StreamChecker.apply on one batch of violating stores.
APPLY_TIMES = """
import json, statistics, sys, time
from harness.contract.checker import StreamChecker
from harness.contract.wire import BlockStored
sizes, repeats = json.loads(sys.argv[1]), int(sys.argv[2])
def store(n):
    return BlockStored([n], 10**12 + n, [0, 1], 2, None, "GPU", None, group_idx=0)
times = {}
for size in sizes:
    events = [store(n) for n in range(size)]
    runs = []
    for _ in range(repeats):
        checker = StreamChecker()
        started = time.process_time()
        checker.apply(events)
        runs.append(time.process_time() - started)
    times[size] = statistics.median(runs)
print(json.dumps(times))
"""


# In the child: time check-stream's check and report of captures of V views.
VIEW_TIMES = """
import json, statistics, sys, time
from pathlib import Path
from harness.verbs.check_stream import check_file, format_report
paths, repeats = json.loads(sys.argv[1]), int(sys.argv[2])
times = {}
for views, path in paths.items():
    runs = []
    for _ in range(repeats):
        started = time.process_time()
        format_report(check_file(Path(path)))
        runs.append(time.process_time() - started)
    times[views] = statistics.median(runs)
print(json.dumps(times))
"""


def child_env(checkout: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(checkout)}


def run_child(checkout: Path, script: str, *args: str):
    """A child's JSON answer: ``script`` run with the checkout first on its path."""
    result = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=checkout,
        env=child_env(checkout),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout)


def apply_times(checkout: Path, repeats: int) -> dict[int, float]:
    times = run_child(checkout, APPLY_TIMES, json.dumps(BATCH_SIZES), str(repeats))
    return {int(size): seconds for size, seconds in times.items()}


def view_times(checkout: Path, repeats: int, captures: dict[int, Path]) -> dict:
    paths = json.dumps({views: str(path) for views, path in captures.items()})
    times = run_child(checkout, VIEW_TIMES, paths, str(repeats))
    return {int(views): seconds for views, seconds in times.items()}


def make_views_capture(path: Path, views: int) -> None:
    """One store per view (group_idx 0 to views - 1), each under a parent
    never stored, in batches of 1,000."""
    import msgspec

    sys.path.insert(0, str(HERE))
    from harness.contract.wire import BlockStored, KVEventBatch

    encoder = msgspec.msgpack.Encoder()
    with path.open("wb") as sink:
        for first in range(0, views, 1000):
            events = [
                BlockStored([n], 10**12 + n, [0, 1], 2, None, "GPU", None, group_idx=n)
                for n in range(first, min(views, first + 1000))
            ]
            sink.write(encoder.encode(KVEventBatch(0.0, events)))


def make_capture(path: Path, megabytes: int) -> None:
    """Batches of 1,000 stores, each under a parent never stored."""
    import msgspec

    sys.path.insert(0, str(HERE))
    from harness.contract.wire import BlockStored, KVEventBatch

    encoder = msgspec.msgpack.Encoder()
    with path.open("wb") as sink:
        first = 0
        while sink.tell() < megabytes << 20:
            events = [
                BlockStored([n], 10**12 + n, [0, 1], 2, None, "GPU", None, group_idx=0)
                for n in range(first, first + 1000)
            ]
            sink.write(encoder.encode(KVEventBatch(0.0, events)))
            first += 1000


def peak_rss_mb(checkout: Path, capture: Path) -> float:
    """Max RSS of one check-stream run, in a child of a fresh child (so that
    RUSAGE_CHILDREN holds that run alone)."""
    probe = (
        "import resource, subprocess, sys\n"
        "subprocess.run([sys.executable, '-m', 'harness', 'check-stream', "
        f"{str(capture)!r}], stdout=subprocess.DEVNULL)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    return run_child(checkout, probe) / 1024


def measure(
    checkout: Path, repeats: int, captures: dict[int, Path], views: dict[int, Path]
) -> dict:
    return {
        "apply_seconds": apply_times(checkout, repeats),
        "view_seconds": view_times(checkout, repeats, views),
        "peak_rss_mb": {
            mb: peak_rss_mb(checkout, path) for mb, path in captures.items()
        },
    }


def growth_cells(times: dict[int, float], sizes) -> str:
    """Each time, and its ratio to the time of half the size."""
    cells = []
    for size in sizes:
        half = times.get(size // 2)
        growth = f" (x{times[size] / half:.1f})" if half else ""
        cells.append(f"{size}: {times[size]:.3f}{growth}")
    return ", ".join(cells)


def report(results: dict[str, dict]) -> None:
    print("StreamChecker.apply, one batch of N violating stores (CPU s, median):")
    for label, result in results.items():
        print(f"  {label}: " + growth_cells(result["apply_seconds"], BATCH_SIZES))
    print("check-stream's check and report, V views of one store each (CPU s, median):")
    for label, result in results.items():
        print(f"  {label}: " + growth_cells(result["view_seconds"], VIEW_COUNTS))
    print("check-stream on an all-violations capture (max RSS, MB):")
    for label, result in results.items():
        cells = [f"{mb} MB: {rss:.0f}" for mb, rss in result["peak_rss_mb"].items()]
        print(f"  {label}: " + ", ".join(cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/checker_scaling.py")
    parser.add_argument(
        "--against", type=Path, help="another checkout of this project to compare"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args(argv)
    print(benchlib.machine_line())
    checkouts = {"this checkout": HERE}
    if args.against:
        checkouts[f"--against {args.against}"] = args.against.resolve()
    with tempfile.TemporaryDirectory(prefix="checker-scaling-") as work:
        captures = {mb: Path(work) / f"violations-{mb}mb.bin" for mb in CAPTURE_MB}
        for mb, path in captures.items():
            make_capture(path, mb)
        views = {count: Path(work) / f"views-{count}.bin" for count in VIEW_COUNTS}
        for count, path in views.items():
            make_views_capture(path, count)
        results = {
            label: measure(checkout, args.repeats, captures, views)
            for label, checkout in checkouts.items()
        }
    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
