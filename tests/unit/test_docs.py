"""What the code says about the documents is true."""

import re

from support import REPO_ROOT

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
