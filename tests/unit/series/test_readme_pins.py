"""The lint holds README.md and main's description to the release main pins."""

from support import REPO_ROOT
from support.trees import write_pins, write_tree

from harness import cli
from harness.series.readme_pins import main_release_errors
from harness.targets import load_targets

SHA = "ab" * 32
PINS = f"""
[defaults]
patches = "patches"
series = {{ default = "series" }}
fixes = {{ default = ["K1"] }}
upstream_tests = ["tests/test_a.py"]
upstream_tests_full = ["tests/test_a.py"]

[targets.main]
description = "newest published vLLM release ({{described}})"
source = {{ sdist = "vllm==0.34.0", sha256 = "{SHA}" }}

[targets."0.33"]
description = "vLLM 0.33.0 backport"
source = {{ sdist = "vllm==0.33.0", sha256 = "{SHA}" }}
"""
README = """\
# series

A quilt patch series (`patches/`) against vLLM {against}, with backports to
0.33 down to 0.24.

The target of your release: 0.33 for vLLM 0.33.0.

`tox -e vllm-main` fetches vLLM {fetches}, applies the default tier, runs the
upstream tests.
"""


def errors(tmp_path, against="0.34.0", fetches="0.34.0", described="0.34.0"):
    write_pins(tmp_path, PINS.replace("{described}", described))
    readme = README.format(against=against, fetches=fetches)
    write_tree(tmp_path, {"README.md": readme})
    return main_release_errors(
        tmp_path, load_targets(tmp_path / "harness/targets.toml")
    )


def test_a_readme_that_names_mains_release_passes(tmp_path):
    assert errors(tmp_path) == []


def test_each_statement_naming_another_release_is_one_error_at_its_line(tmp_path):
    assert errors(tmp_path, against="0.33.0", fetches="0.33.0") == [
        "README.md:3: names vLLM 0.33.0 as what the series is made against, but "
        "harness/targets.toml pins vllm==0.34.0 for main",
        "README.md:8: names vLLM 0.33.0 as what `tox -e vllm-main` fetches, but "
        "harness/targets.toml pins vllm==0.34.0 for main",
    ]


def test_a_statement_the_readme_no_longer_makes_is_an_error(tmp_path):
    write_pins(tmp_path, PINS.replace("{described}", "0.34.0"))
    write_tree(tmp_path, {"README.md": "# series\n\nAgainst vLLM 0.34.0.\n"})
    found = main_release_errors(
        tmp_path, load_targets(tmp_path / "harness/targets.toml")
    )
    assert len(found) == 2
    assert found[0].startswith("README.md: no longer says what the series is made")
    assert "MAIN_STATEMENTS in harness/series/readme_pins.py" in found[0]


def test_mains_description_naming_another_release_is_an_error(tmp_path):
    assert errors(tmp_path, described="0.33.0") == [
        "harness/targets.toml:10: main's description names 0.33.0, but "
        "harness/targets.toml pins vllm==0.34.0 for main"
    ]


def test_the_lint_reports_it_and_exits_1(tmp_path, capsys):
    errors(tmp_path, fetches="0.33.0")
    write_tree(tmp_path / "patches", {"series": "# none yet\n"})
    assert cli.main(["lint", "--root", str(tmp_path)]) == 1
    assert (
        "README.md:8: names vLLM 0.33.0 as what `tox -e vllm-main` fetches, but "
        "harness/targets.toml pins vllm==0.34.0 for main"
    ) in capsys.readouterr().out.splitlines()


def test_this_repositorys_readme_names_mains_release():
    assert (
        main_release_errors(REPO_ROOT, load_targets(REPO_ROOT / "harness/targets.toml"))
        == []
    )
