"""The media packages of an engine's environment: `install` and `status`
say when one does not load against its torch (the engine would not start),
with the command that fixes it; the probe is bounded and never trusted."""

import shlex
import sys

import pytest
from support.installed import run_verb

from harness.installed import media
from harness.installed.media import MediaCheck, check_media


def add_dist(site, name: str, version: str, body: str) -> None:
    """A distribution ``name`` in site: its module and its METADATA."""
    (site / name).mkdir()
    (site / name / "__init__.py").write_text(body)
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    )


BROKEN = 'raise OSError("Could not load this library: /v/torchaudio/_torchaudio.so")\n'


@pytest.fixture
def engine_site(site):
    """The release installed, with torch 2.13.0+cpu beside it."""
    add_dist(site, "torch", "2.13.0+cpu", "")
    return site


def test_an_environment_without_media_packages_is_fine(engine_site):
    found = check_media(sys.executable)
    assert found == MediaCheck(sys.executable, "2.13.0+cpu", {}, {})
    assert found.advice() is None


def test_those_that_load_are_fine_those_that_do_not_are_named(engine_site):
    add_dist(engine_site, "torchvision", "0.28.0", "import torch\n")
    add_dist(engine_site, "torchaudio", "2.11.1", BROKEN)
    found = check_media(sys.executable)
    assert found.present == {"torchvision": "0.28.0", "torchaudio": "2.11.1"}
    assert found.failing == {
        "torchaudio": "OSError: Could not load this library: "
        "/v/torchaudio/_torchaudio.so"
    }
    python = shlex.quote(sys.executable)
    assert found.advice() == (
        "the engine will not start: torchaudio 2.11.1 does not load against "
        "torch 2.13.0+cpu (torchaudio: OSError: Could not load this library: "
        "/v/torchaudio/_torchaudio.so); vLLM needs none of them for a text "
        f"model: {python} -m pip uninstall -y torchaudio"
    )


def test_a_package_that_ends_the_interpreter_is_one_that_does_not_load(
    engine_site,
):
    add_dist(engine_site, "torchaudio", "2.11.1", BROKEN)
    add_dist(engine_site, "torchcodec", "0.17.0", "import os\nos._exit(3)\n")
    add_dist(engine_site, "torchvision", "0.28.0", "")
    found = check_media(sys.executable)
    assert found.failing == {
        "torchaudio": "OSError: Could not load this library: "
        "/v/torchaudio/_torchaudio.so",
        "torchcodec": "the probe ended (exit 3) importing it",
    }  # torchvision, after it, was not tried
    assert "torchaudio 2.11.1, torchcodec 0.17.0 do not load" in found.advice()
    assert found.advice().endswith("uninstall -y torchaudio torchcodec")


def test_a_probe_past_its_time_says_it_cannot_tell(engine_site, monkeypatch):
    add_dist(engine_site, "torchaudio", "2.11.1", "import time\ntime.sleep(30)\n")
    monkeypatch.setattr(media, "PROBE_TIMEOUT_S", 1.0)
    found = check_media(sys.executable)
    assert found.unknown == f"{sys.executable} did not finish within 1 s; it was ended"
    assert found.advice().startswith("cannot tell whether the media packages of ")


@pytest.mark.parametrize(
    "stdout",
    ["", "not json\n", '{"torch": 1, "present": {}}\n', '{"present": {"os": "1"}}\n'],
    ids=["nothing", "not-json", "bad-torch", "not-a-media-package"],
)
def test_an_answer_that_is_not_the_probes_is_not_trusted(stdout):
    import subprocess

    result = subprocess.CompletedProcess([], 0, stdout, "")
    found = media._answer("py", result)
    assert found.unknown is not None and found.failing == {}


def test_status_says_the_engine_will_not_start_and_exits_1(engine_site, capsys):
    add_dist(engine_site, "torchaudio", "2.11.1", BROKEN)
    status, out, _ = run_verb(capsys, "status")
    assert status == 1
    assert out.splitlines()[-1].startswith(
        "the engine will not start: torchaudio 2.11.1 does not load against torch "
    )
    assert "RECORD: all 4 files of vllm/ are as released\n" in out


def test_install_warns_and_installs(engine_site, capsys):
    add_dist(engine_site, "torchaudio", "2.11.1", BROKEN)
    status, out, err = run_verb(capsys, "install", "--target", "t")
    assert status == 0
    assert "installed target t's default tier" in out
    assert "warning: the engine will not start: torchaudio 2.11.1 " in err
    assert run_verb(capsys, "uninstall")[0] == 0
