"""`e2e model --out DIR`: the sessions' tiny model, written where the user
asks and nowhere the harness reads as pristine, its path printed; built
with any Python whose torch and transformers load, the media packages kept
out, and a package that does not load never taken for a write that failed."""

import errno
import sys

import pytest

from harness import cli
from harness.engine import engine
from harness.errors import BrokenDependency, MissingDependency, OutputError
from harness.installed.media import MEDIA
from harness.trees import preflight


@pytest.fixture
def built(monkeypatch):
    """make_model and save_model writing a config.json (torch is not here),
    with the directories save_model was asked to write."""
    asked = []

    def save(parts, dest):
        assert parts == "the model"
        asked.append(dest)
        (dest / "config.json").write_text("{}")
        return dest

    monkeypatch.setattr(engine, "make_model", lambda: "the model")
    monkeypatch.setattr(engine, "save_model", save)
    monkeypatch.setattr(preflight, "missing", lambda names: [])
    return asked


@pytest.mark.parametrize("existing", [False, True], ids=["new", "empty"])
def test_the_model_is_written_and_its_path_printed(
    tmp_path, cache, built, capsys, existing
):
    out = tmp_path / "models" / "tiny"
    if existing:
        out.mkdir(parents=True)
    assert cli.main(["e2e", "model", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert printed.out == f"{out}\n"
    assert "the model's context is 512 tokens, prompt and output together" in (
        printed.err
    )
    assert (out / "config.json").read_text() == "{}"
    assert [path.name for path in out.parent.iterdir()] == ["tiny"]  # no scratch


def test_a_non_empty_directory_is_refused_in_one_line(tmp_path, cache, built, capsys):
    out = tmp_path / "tiny"
    out.mkdir()
    (out / "weights").write_text("mine")
    assert cli.main(["e2e", "model", "--out", str(out)]) == OutputError.exit_code
    assert capsys.readouterr().err == (
        f"error: --out {out} exists and is not an empty directory; remove it or "
        f"choose another\n"
    )
    assert not built and (out / "weights").read_text() == "mine"


@pytest.mark.hostile
def test_a_directory_in_the_caches_trees_is_refused(tmp_path, cache, built, capsys):
    out = cache / "trees" / "tiny"
    assert cli.main(["e2e", "model", "--out", str(out)]) == OutputError.exit_code
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: --out {out} is inside the harness cache's ")
    assert not built and not out.exists()


def test_without_torch_it_says_where_to_run_it(tmp_path, cache, monkeypatch, capsys):
    monkeypatch.setattr(preflight, "missing", lambda names: ["torch"])
    out = tmp_path / "tiny"
    status = cli.main(["e2e", "model", "--out", str(out)])
    assert status == MissingDependency.exit_code
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: torch not installed for {sys.executable}; ")
    assert "ENGINE -m harness e2e model" in line
    assert not out.exists()


def test_no_media_package_is_imported_while_the_model_is_built(
    tmp_path, cache, built, monkeypatch
):
    """transformers imports whichever media package is installed, and one
    built for another torch fails (the engine venv pip makes): the model
    needs none, so none is importable while it is built."""
    seen = {}

    def make():
        for name in MEDIA:
            with pytest.raises(ImportError):
                __import__(name)
            seen[name] = sys.modules[name]
        return "the model"

    monkeypatch.setattr(engine, "make_model", make)
    assert cli.main(["e2e", "model", "--out", str(tmp_path / "tiny")]) == 0
    assert seen == dict.fromkeys(MEDIA)
    assert not any(name in sys.modules for name in MEDIA)


def test_a_package_that_does_not_load_is_named_not_the_directory(
    tmp_path, cache, built, monkeypatch, capsys
):
    def make():
        try:
            raise OSError("Could not load this library: /venv/torchaudio/_t.so")
        except OSError as exc:
            raise ModuleNotFoundError("Could not import module 'Granite'") from exc

    monkeypatch.setattr(engine, "make_model", make)
    out = tmp_path / "tiny"
    status = cli.main(["e2e", "model", "--out", str(out)])
    assert status == BrokenDependency.exit_code == 22
    [line] = capsys.readouterr().err.splitlines()[-1:]
    assert line == (
        f"error: torch or transformers does not load for {sys.executable} "
        f"(OSError: Could not load this library: /venv/torchaudio/_t.so); repair "
        f"that environment, or run this with a Python whose torch and "
        f"transformers import"
    )
    assert not built and not out.exists()


def test_a_write_that_fails_is_named_as_one(
    tmp_path, cache, built, monkeypatch, capsys
):
    def save(parts, dest):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(engine, "save_model", save)
    out = tmp_path / "tiny"
    assert cli.main(["e2e", "model", "--out", str(out)]) == OutputError.exit_code
    [line] = capsys.readouterr().err.splitlines()[-1:]
    assert line == f"error: cannot write {out}: No space left on device"
    assert not out.exists()
    assert not any("scratch" in path.name for path in tmp_path.iterdir())


@pytest.mark.hostile
def test_a_stopped_build_removes_the_folders_it_made(
    tmp_path, cache, built, monkeypatch, capsys
):
    def stopped(parts, dest):
        (dest / "config.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "save_model", stopped)
    out = tmp_path / "new" / "a" / "tiny"
    assert cli.main(["e2e", "model", "--out", str(out)]) == 130
    assert not (tmp_path / "new").exists()


@pytest.mark.hostile
@pytest.mark.parametrize(
    "parts", [("x" * 300,), ("y" * 250,) * 20], ids=["NAME_MAX", "PATH_MAX"]
)
def test_an_out_too_long_to_be_made_is_one_line(tmp_path, cache, built, capsys, parts):
    out = tmp_path.joinpath(*parts)
    assert cli.main(["e2e", "model", "--out", str(out)]) == OutputError.exit_code
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: cannot make --out {tmp_path}/")
    assert line.endswith(
        "File name too long"
        if len(parts) == 1
        else f"the path is {len(str(out))} bytes long, and the system takes "
        f"paths under 4096"
    )
    assert not built and not any(tmp_path.iterdir())


@pytest.mark.hostile
def test_a_relative_out_with_the_working_directory_removed_is_one_line(
    tmp_path, cache, built, capsys, monkeypatch
):
    (tmp_path / "gone").mkdir()
    monkeypatch.chdir(tmp_path / "gone")
    (tmp_path / "gone").rmdir()
    assert cli.main(["e2e", "model", "--out", "tiny"]) == OutputError.exit_code
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("error: --out tiny is relative, and the working directory")
    assert not built
