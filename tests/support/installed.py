"""A vLLM "installed" in a directory as a wheel leaves it (the package and a
.dist-info with RECORD), the sdist of its release, and a target whose series
changes it: what install, status and uninstall work on."""

import base64
import hashlib
from pathlib import Path

from support.series import edited
from support.trees import (
    diff,
    make_sdist,
    sha256_of,
    target_table,
    use_checkout,
    write_pins,
    write_tree,
)

POOL = "".join(f"line {n}\n" for n in range(1, 21))
UTILS = "def hash_block():\n    return 0\n"
RELEASE = {
    "vllm/__init__.py": "__version__ = '9.9.9'\n",
    "vllm/v1/core/block_pool.py": POOL,
    "vllm/v1/core/kv_cache_utils.py": UTILS,
    "vllm/other.py": "untouched = True\n",
}
SDIST = {
    **RELEASE,
    "tests/test_pool.py": "def test_pool():\n    assert True\n",
    "setup.py": 'raise SystemExit("setup.py must never run")\n',
}
PATCHES = {
    "0001-pool.patch": "Subject: pool\n\n"
    + diff("vllm/v1/core/block_pool.py", POOL, edited(POOL, "line 3\n", "line three\n"))
    + diff(
        "tests/test_pool.py",
        SDIST["tests/test_pool.py"],
        SDIST["tests/test_pool.py"] + "\n\ndef test_more():\n    assert True\n",
    ),
    "0002-utils.patch": "Subject: utils\n\n"
    + diff("vllm/v1/core/kv_cache_utils.py", UTILS, edited(UTILS, "0", "1")),
}


def recorded(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def install_release(
    site: Path, version: str = "9.9.9", name: str = "vllm", files=None
) -> Path:
    """The release's files in ``site`` with a dist-info whose RECORD lists
    them; returns RECORD's path."""
    files = RELEASE if files is None else files
    write_tree(site, files)
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    )
    rows = [
        f"{path},{recorded(text.encode())},{len(text.encode())}"
        for path, text in files.items()
    ]
    rows += [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    return info / "RECORD"


def release_target(tmp_path: Path, monkeypatch, sdist=None) -> Path:
    """Target t: the sdist vllm 9.9.9 (in the cache already, as a fetch
    leaves it), series 0001 and strict 0001+0002. Returns the cache."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(cache))
    archive = make_sdist(cache / "sdists", "vllm", "9.9.9", sdist or SDIST)
    patches = write_tree(tmp_path / "patches", PATCHES)
    (patches / "series").write_text("0001-pool.patch\n")
    (patches / "series.strict").write_text("0001-pool.patch\n0002-utils.patch\n")
    source = f'{{ sdist = "vllm==9.9.9", sha256 = "{sha256_of(archive)}" }}'
    use_checkout(monkeypatch, write_pins(tmp_path, target_table(source)))
    return cache


def snapshot(root: Path) -> dict[str, str]:
    """Every file under root and its sha256 (for "nothing else changed")."""
    return {
        str(path.relative_to(root)): sha256_of(path)
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def run_verb(capsys, *args) -> tuple[int, str, str]:
    """A verb run as the command line runs it: (status, stdout, stderr)."""
    from harness import cli

    status = cli.main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def refused_line(capsys, *args, code: int = 19) -> str:
    """The one error line of a verb that must end with status ``code``."""
    status, _, err = run_verb(capsys, *args)
    assert status == code, err
    [line] = [line for line in err.splitlines() if line.startswith("error: ")]
    assert "Traceback" not in err
    return line
