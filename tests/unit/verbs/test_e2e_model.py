"""`e2e model --out DIR`: the sessions' tiny model, written where the user
asks and nowhere the harness reads as pristine, its path printed."""

import pytest

from harness import cli
from harness.engine import engine
from harness.errors import MissingDependency, OutputError
from harness.trees import preflight


@pytest.fixture
def built(monkeypatch):
    """build_model writing a config.json (torch is not here), with the
    directories it was asked to build in."""
    asked = []

    def build(dest):
        asked.append(dest)
        (dest / "config.json").write_text("{}")
        return dest

    monkeypatch.setattr(engine, "build_model", build)
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
    assert capsys.readouterr().out == f"{out}\n"
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
    assert line.startswith("error: torch not installed here; the model is built ")
    assert not out.exists()


@pytest.mark.hostile
def test_a_stopped_build_removes_the_folders_it_made(
    tmp_path, cache, built, monkeypatch, capsys
):
    def stopped(dest):
        (dest / "config.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "build_model", stopped)
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
