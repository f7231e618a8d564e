"""A tiny series against a tiny pristine tree, and a git fork of that tree."""

import subprocess

from harness import targets
from support.trees import diff, target_table, use_checkout, write_pins, write_tree

PRISTINE = {
    "vllm/block_pool.py": "".join(f"line {n}\n" for n in range(1, 21)),
    "vllm/old.py": "doomed = True\n",
    "tests/test_pool.py": "def test_pool():\n    assert True\n",
    "README.md": "pristine\n",
}


def edited(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new)


POOL = PRISTINE["vllm/block_pool.py"]
GOOD_PATCHES = {
    "0001-emit-parent.patch": "Subject: emit the parent\n\n"
    + diff("vllm/block_pool.py", POOL, edited(POOL, "line 3\n", "line three\n")),
    "0002-add-module.patch": diff("vllm/events/ancestry.py", None, "FILLED = 1\n"),
    "0003-drop-old.patch": diff("vllm/old.py", PRISTINE["vllm/old.py"], None),
    "0004-readme-p0.patch": diff("README.md", "pristine\n", "patched\n", ("", "")),
}
GOOD_SERIES = """# the default tier
0001-emit-parent.patch
0002-add-module.patch -p1
0003-drop-old.patch   # trailing comment

0004-readme-p0.patch -p0
"""
CORRUPT = "--- a/vllm/block_pool.py\n+++ b/vllm/block_pool.py\n@@ -1,3 +1,3 @@\n-x\n"
STALE = diff(
    "vllm/block_pool.py",
    edited(POOL, "line 12\n", "line twelve\n"),
    edited(POOL, "line 12\n", "line 12!\n"),
)


def make_series(tmp_path, monkeypatch, patches: dict[str, str], series: str):
    """Target t: a path source with PRISTINE, these patches and series file."""
    patches_dir = write_tree(tmp_path / "patches", patches)
    (patches_dir / "series").write_text(series)
    write_tree(tmp_path / "pristine", PRISTINE)
    pins = write_pins(tmp_path, target_table('{ path = "pristine" }'))
    use_checkout(monkeypatch, pins)
    return targets.get_target("t")


def tree_files(root):
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def git(*args, cwd):
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def make_fork(tmp_path):
    fork = write_tree(tmp_path / "fork", PRISTINE)
    git("init", "-q", cwd=fork)
    git("add", ".", cwd=fork)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base", cwd=fork)
    return fork
