"""The JSON-lines worker protocol, with a child that runs a tiny handler."""

import os
import subprocess
import sys

import pytest
from support import REPO_ROOT

from harness.engine.session import engine_env
from harness.errors import WorkloadError
from harness.trees.env import STREAM_ENV
from harness.workloads.worker import TreeWorker

CHILD = """
import sys
from harness.workloads.worker import serve

def handle(request):
    print("a log line on stdout, as vLLM writes them")
    if request.get("fail"):
        raise ValueError("asked to fail")
    if request.get("exit"):
        sys.exit(3)
    return {"doubled": 2 * request["n"]}

serve(handle)
"""


@pytest.fixture
def worker(tmp_path):
    with TreeWorker(tmp_path, ["-c", CHILD], tmp_path / "worker.log") as child:
        yield child


def test_replies_come_back_in_order_and_logs_go_to_the_log(worker, tmp_path):
    worker.submit({"n": 1})
    worker.submit({"n": 2})
    assert worker.wait() == {"ok": True, "doubled": 2}
    assert worker.wait() == {"ok": True, "doubled": 4}
    assert worker.ask({"n": 5})["doubled"] == 10
    log = (tmp_path / "worker.log").read_text()
    assert log.count("a log line on stdout") == 3


def test_a_failing_request_names_the_tree_the_error_and_the_log(worker, tmp_path):
    with pytest.raises(WorkloadError) as failed:
        worker.ask({"fail": True})
    message = str(failed.value)
    assert message.startswith(f"{tmp_path}: ValueError: asked to fail\n")
    assert "a log line on stdout" in message
    assert worker.ask({"n": 3})["doubled"] == 6  # the worker goes on


def test_a_worker_that_exits_is_an_error(worker):
    with pytest.raises(WorkloadError, match="the worker exited"):
        worker.ask({"exit": True})


def test_the_child_runs_with_the_tree_first_on_its_path(tmp_path):
    (tmp_path / "probe_module.py").write_text("WHERE = 'the tree'\n")
    child = CHILD.replace(
        'return {"doubled"',
        'import probe_module\n    return {"where": probe_module.WHERE, "doubled"',
    )
    with TreeWorker(tmp_path, ["-c", child], tmp_path / "worker.log") as worker:
        assert worker.ask({"n": 1})["where"] == "the tree"


def test_the_child_runs_with_the_hash_seed_pinned(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONHASHSEED", "12345")  # as tox sets a random one
    child = CHILD.replace(
        'return {"doubled"',
        'import os\n    return {"seed": os.environ["PYTHONHASHSEED"], "doubled"',
    )
    with TreeWorker(tmp_path, ["-c", child], tmp_path / "worker.log") as worker:
        assert worker.ask({"n": 1})["seed"] == STREAM_ENV["PYTHONHASHSEED"]


def test_engine_sessions_run_with_the_same_pinned_seed(monkeypatch):
    monkeypatch.setenv("PYTHONHASHSEED", "12345")
    assert engine_env()["PYTHONHASHSEED"] == STREAM_ENV["PYTHONHASHSEED"]


def served(requests: str) -> list[str]:
    """The replies of the worker CHILD runs to ``requests``, one per line."""
    child = subprocess.run(
        [sys.executable, "-c", CHILD],
        input=requests,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr
    return child.stdout.splitlines()


@pytest.mark.hostile
def test_a_request_that_is_not_a_json_object_gets_an_error_reply():
    assert served('not json\n[1]\n{"n": 4}\n') == [
        '{"ok": false, "error": "request 1 is not JSON (Expecting value: line 1 '
        "column 1 (char 0)): 'not json\\\\n'\"}",
        '{"ok": false, "error": "request 2 is a JSON list, not an object"}',
        '{"ok": true, "doubled": 8}',
    ]


@pytest.mark.hostile
def test_a_request_nested_too_deep_gets_an_error_reply_and_the_next_is_served():
    deep = "[" * 100_000 + "]" * 100_000
    assert served(f'{deep}\n{{"n": 4}}\n') == [
        '{"ok": false, "error": "request 1 is not JSON (nested deeper than the '
        f"parser recurses): '{'[' * 80}'\"}}",
        '{"ok": true, "doubled": 8}',
    ]


def test_workloads_without_a_vllm_tree_on_the_path_say_what_to_set(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "workloads",
            "--config",
            "pool-2x6",
            "--out",
            str(tmp_path / "run.rec"),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert result.returncode == WorkloadError.exit_code == 13
    assert result.stderr == (
        "error: vllm cannot be imported here; run workloads with a vLLM tree first "
        "on the path: PYTHONPATH=<vllm tree>:. VLLM_TARGET_DEVICE=cpu python -m "
        "harness workloads ... (python -m harness fetch --target main prints a "
        "tree's path)\n"
    )
    assert not (tmp_path / "run.rec").exists()
