"""What the code says about the documents is true."""

import re

from support import REPO_ROOT

from harness.errors import exit_codes

DOC_REFERENCE = re.compile(r"\bdocs/[\w.-]+\.md\b")


def test_every_document_the_code_names_exists():
    missing = {
        f"{path.relative_to(REPO_ROOT)}: {name}"
        for folder in ("harness", "tests", "benchmarks", "scripts")
        for path in (REPO_ROOT / folder).rglob("*")
        if path.suffix in (".py", ".sh", ".toml")
        for name in DOC_REFERENCE.findall(path.read_text())
        if not (REPO_ROOT / name).is_file()
    }
    assert missing == set()


def test_readme_lists_every_exit_status():
    readme = (REPO_ROOT / "README.md").read_text()
    table = readme[readme.index("## Exit status") :].split("\n\n")[2]
    listed = set()
    for row in table.splitlines()[2:]:
        listed |= {int(code) for code in row.split("|")[1].split(",")}
    assert listed == set(exit_codes())
