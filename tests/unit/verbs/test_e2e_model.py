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
