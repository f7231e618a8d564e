"""What the code says about the documents is true."""

import re

from support import REPO_ROOT

from harness.errors import exit_codes

DOC_REFERENCE = re.compile(r"\bdocs/[\w.-]+\.md\b")
# A Markdown link to a file of this repository (not a URL, not an anchor).
PAGE_LINK = re.compile(r"\]\((?!https?:|#|mailto:)([^)\s]+)\)")


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


def test_every_link_between_pages_resolves():
    pages = [REPO_ROOT / "README.md", REPO_ROOT / "CONTRIBUTING.md"]
    pages += sorted((REPO_ROOT / "docs").glob("*.md"))
    broken = {
        f"{page.relative_to(REPO_ROOT)}: {target}"
        for page in pages
        for target in PAGE_LINK.findall(page.read_text())
        if not (page.parent / target.split("#")[0]).exists()
    }
    assert broken == set()


def test_exit_status_page_lists_every_exit_status():
    page = (REPO_ROOT / "docs" / "exit-status.md").read_text()
    table = page[page.index("| status | meaning |") :].split("\n\n")[0]
    listed = set()
    for row in table.splitlines()[2:]:
        listed |= {int(code) for code in row.split("|")[1].split(",")}
    assert listed == set(exit_codes())
