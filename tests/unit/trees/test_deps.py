"""`deps`: a progress line per step around pip's own output."""

import sys

from harness import cli
from harness.trees import deps, preflight

COMMON = """\
# vLLM's requirements
regex # a comment after it
numpy >= 1
-r other.txt

protobuf == 7; platform_machine == "s390x"
"""


def test_deps_says_what_it_installs_and_how_it_ended(tmp_path, monkeypatch, capsys):
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements/common.txt").write_text(COMMON)
    asked = []
    monkeypatch.setattr(preflight, "missing", lambda names: [])
    monkeypatch.setattr(deps, "pristine_tree", lambda target: tmp_path)
    monkeypatch.setattr(deps, "pip", lambda *args, **held: asked.append(args) or 7)
    assert cli.main(["deps", "--target", "main"]) == 7
    assert asked and asked[0][:3] == (
        "install",
        "--requirement",
        str(tmp_path / "requirements/common.txt"),
    )
    assert capsys.readouterr().err.splitlines() == [
        "harness: deps: reading the requirements of target main's tree",
        f"harness: deps: installing vLLM's requirements (3 packages, "
        f"{tmp_path / 'requirements/common.txt'}), tblib and pytest-asyncio for "
        f"its tests and torch==2.13.0 into {sys.prefix}; pip's output follows ...",
        "harness: deps: pip failed (exit status 7)",
    ]
