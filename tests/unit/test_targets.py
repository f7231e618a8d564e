import re

import pytest
from support.trees import target_table, write_pins

from harness.targets import TargetError, get_target, load_targets

SHA = "ab" * 32
COMMIT = "c0" * 20


def test_project_pins_parse_with_the_targets_the_tox_envs_name():
    targets = load_targets()
    assert {"main", "0.33", "0.32", "0.31", "0.30"} <= set(targets)
    assert targets["main"].source == targets["0.33"].source
    assert targets["main"].source.version == "0.33.0"
    assert targets["0.32"].patches_dir.name == "v0.32"
    assert targets["0.30"].series_file("strict").name == "series.strict"


def test_sdist_target_parses_into_dataclasses(tmp_path):
    path = write_pins(
        tmp_path, target_table(f'{{ sdist = "vllm==1.2.3", sha256 = "{SHA}" }}')
    )
    target = get_target("t", path)
    assert (target.source.name, target.source.version) == ("vllm", "1.2.3")
    assert target.source.sha256 == SHA
    assert target.patches_dir == tmp_path / "patches"
    assert target.series_file("default") == tmp_path / "patches" / "series"
    assert target.selection("ci") == ("tests/test_a.py",)
    assert target.selection("full")[1] == "tests/test_b.py::test_one[x-1]"


def test_git_and_path_sources_parse(tmp_path):
    path = write_pins(
        tmp_path, target_table(f'{{ git = "/srv/vllm.git", commit = "{COMMIT}" }}')
    )
    assert get_target("t", path).source.commit == COMMIT
    path.write_text(target_table('{ path = "vendor/vllm" }'))
    assert get_target("t", path).source.path == tmp_path / "vendor" / "vllm"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('{ sdist = "vllm==1.0" }', "target t: missing field source.sha256"),
        (
            f'{{ sdist = "vllm==1.0", sha256 = "{SHA}", path = "x" }}',
            "exactly one of sdist, git, path (found: sdist, path)",
        ),
        ("{ }", "exactly one of sdist, git, path (found: none)"),
        ('{ git = "/srv/vllm.git" }', "target t: missing field source.commit"),
        (
            '{ git = "/srv/vllm.git", commit = "main" }',
            "source.commit must be a full 40-hex commit id",
        ),
        (
            '{ sdist = "vllm>=1.0", sha256 = "x" }',
            "source.sdist must read NAME==VERSION",
        ),
        (
            '{ sdist = "vllm==1.0", sha256 = "ABC" }',
            "source.sha256 must be 64 lowercase",
        ),
        ('{ path = "" }', "target t: field source.path must be a non-empty str"),
        (
            '{ path = "x", sha256 = "y" }',
            "source.sha256 does not belong to a path source",
        ),
    ],
)
def test_invalid_source_is_refused_naming_target_and_field(tmp_path, source, message):
    path = write_pins(tmp_path, target_table(source))
    with pytest.raises(TargetError, match=re.escape(message)):
        load_targets(path)


def test_missing_and_unknown_fields_are_named(tmp_path):
    path = write_pins(tmp_path, target_table('{ path = "x" }', extra='colour = "red"'))
    with pytest.raises(TargetError, match="target t: unknown field.* colour"):
        load_targets(path)
    path.write_text(
        target_table('{ path = "x" }').replace(
            'upstream_tests = ["tests/test_a.py"]', ""
        )
    )
    with pytest.raises(TargetError, match="target t: missing field upstream_tests$"):
        load_targets(path)
    path.write_text(
        target_table('{ path = "x" }').replace(
            'strict = "series.strict"', 'strict = ""'
        )
    )
    with pytest.raises(TargetError, match="field series.strict must be a file name"):
        load_targets(path)


def test_unknown_target_tier_and_selection_are_refused(tmp_path):
    path = write_pins(tmp_path, target_table('{ path = "x" }'))
    with pytest.raises(TargetError, match="unknown target 'nope' \\(known: t\\)"):
        get_target("nope", path)
    with pytest.raises(TargetError, match="target t: no tier 'extra'"):
        get_target("t", path).series_file("extra")
    with pytest.raises(TargetError, match="unknown selection 'most'"):
        get_target("t", path).selection("most")


def test_series_file_that_does_not_exist_yet_is_not_a_parse_error(tmp_path):
    path = write_pins(tmp_path, target_table('{ path = "x" }'))
    target = get_target("t", path)
    assert not target.series_file("default").exists()


def test_broken_toml_is_reported_with_its_path(tmp_path):
    path = write_pins(tmp_path, "[targets.t\n")
    with pytest.raises(TargetError, match="targets.toml is not valid TOML"):
        load_targets(path)
