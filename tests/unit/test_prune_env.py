"""scripts/prune_env.sh: tox.ini's [verdict] removes its environment after the
verdict only when HARNESS_PRUNE_ENVS=1, and only a virtual environment."""

import os
import subprocess

from support import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "prune_env.sh"


def prune(env_dir, **env):
    environ = {k: v for k, v in os.environ.items() if k != "HARNESS_PRUNE_ENVS"}
    return subprocess.run(
        ["bash", str(SCRIPT), str(env_dir)],
        env={**environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )


def make_venv(path):
    (path / "lib").mkdir(parents=True)
    (path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (path / "lib" / "big").write_bytes(b"x" * 1024)
    return path


def test_the_environment_stays_unless_pruning_is_asked_for(tmp_path):
    venv = make_venv(tmp_path / "vllm-main")
    for env in ({}, {"HARNESS_PRUNE_ENVS": "0"}, {"HARNESS_PRUNE_ENVS": ""}):
        done = prune(venv, **env)
        assert done.returncode == 0, done.stderr
        assert (venv / "lib" / "big").exists()


def test_pruning_removes_the_environment(tmp_path):
    venv = make_venv(tmp_path / "vllm-main")
    done = prune(venv, HARNESS_PRUNE_ENVS="1")
    assert done.returncode == 0, done.stderr
    assert not venv.exists()
    assert f"removed {venv}" in done.stdout


def test_a_directory_that_is_not_a_virtual_environment_is_kept(tmp_path):
    (tmp_path / "keep").write_text("mine")
    done = prune(tmp_path, HARNESS_PRUNE_ENVS="1")
    assert done.returncode == 2
    assert (tmp_path / "keep").read_text() == "mine"
    assert "not a virtual environment" in done.stderr
    assert done.stderr.count("\n") == 1
