"""A tiny vLLM-like target whose series `export` can submit: three mails with
tests that fail without their fix, a verdict of it, and a submitter."""

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from harness import cli, targets
from harness.submission.submitter import PROJECT_IDENTITIES
from harness.verdict import Conformance, Verdict
from support.trees import diff, target_table, use_checkout, write_pins, write_tree

SUBMITTER = "Jane Doe <jane@doe.name>"
PLACEHOLDER = str(PROJECT_IDENTITIES[0])
PERSON = "Ada Lovelace <ada@lovelace.name>"
POOL = "def capacity():\n    return 4\n"
TEST_POOL = (
    "from vllm.pool import capacity\n\n\n"
    "def test_capacity():\n    assert capacity() == 4\n"
)
PRISTINE = {
    "vllm/__init__.py": "",
    "vllm/pool.py": POOL,
    "vllm/old.py": "doomed = True\n",
    "tests/test_pool.py": TEST_POOL,
    # a sdist's .gitignore must not keep files out of the exported base
    ".gitignore": "*.log\n",
    "notes.log": "shipped in the sdist although ignored\n",
}
# One test changed (its expectation) and one added: both fail before the fix.
FIXED_TEST_POOL = TEST_POOL.replace("== 4", "== 5") + (
    "\n\ndef test_capacity_is_reported():\n    assert capacity() > 4\n"
)
TEST_ANCESTRY = (
    "from vllm.ancestry import FILLED\n\n\ndef test_filled():\n    assert FILLED == 1\n"
)
TEST_OLD = (
    "import importlib.util\n\n\n"
    "def test_old_module_is_gone():\n"
    '    assert importlib.util.find_spec("vllm.old") is None\n'
)


def mail(author: str, subject: str, body: str, diff_text: str, sign_off=True) -> str:
    trailers = "Co-authored-by: Claude <noreply@anthropic.com>\n"
    trailers += f"Signed-off-by: {author}\n" if sign_off else ""
    return (
        f"From: {author}\nDate: Mon, 30 Nov 2026 01:28:02 +0000\n"
        f"Subject: {subject}\n\n{body}\n\nFixes #58119\n\n{trailers}---\n{diff_text}"
    )


PATCHES = {
    "0001-report-the-parent.patch": mail(
        PLACEHOLDER,
        "[Bugfix][KV Events] Report the parent",
        "Report the boundary.",
        diff("vllm/pool.py", POOL, POOL.replace("4", "5"))
        + diff("tests/test_pool.py", TEST_POOL, FIXED_TEST_POOL),
    ),
    "0002-add-module.patch": mail(
        PLACEHOLDER,
        "[Core] Add the ancestry module",
        "A new module.",
        diff("vllm/ancestry.py", None, "FILLED = 1\n")
        + diff("notes.log", PRISTINE["notes.log"], "patched too\n")
        + diff("tests/test_ancestry.py", None, TEST_ANCESTRY),
    ),
    "0003-drop-old.patch": mail(
        PERSON,
        "[Misc] Drop the old module",
        "Optional: only in the strict tier.",
        diff("vllm/old.py", PRISTINE["vllm/old.py"], None)
        + diff("tests/test_old.py", None, TEST_OLD),
    ),
}
SERIES = "0001-report-the-parent.patch\n0002-add-module.patch\n"
STRICT = SERIES + "0003-drop-old.patch\n"
SUBJECTS = [
    "[Bugfix][KV Events] Report the parent",
    "[Core] Add the ancestry module",
    "[Misc] Drop the old module",
]
# The tests each patch adds, as the verdict of the patched tree names them.
ADDED_TESTS = [
    "tests/test_pool.py::test_capacity_is_reported",
    "tests/test_ancestry.py::test_filled",
    "tests/test_old.py::test_old_module_is_gone",
]


def kv_events_source(fields: int) -> str:
    """A vllm/distributed/kv_events.py whose BlockStored declares ``fields``
    fields (7 required, the rest optional), defined as vLLM defines it, with
    imports the wire measurement must not need."""
    required = (
        "block_hashes: list[ExternalBlockHash]",
        "parent_block_hash: ExternalBlockHash | None",
        "token_ids: list[int]",
        "block_size: int",
        "lora_id: int | None",
        "medium: str | None",
        "lora_name: str | None",
    )
    optional = tuple(f"optional_{n}: int | None = None" for n in range(fields - 7))
    body = "".join(f"    {line}\n" for line in (*required, *optional))
    return (
        "import zmq  # not installed where the measurement runs\n"
        "import msgspec\n"
        "from vllm.v1.core.kv_cache_utils import ExternalBlockHash\n\n\n"
        "class KVCacheEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):\n"
        '    """Base class."""\n\n\n'
        f"class BlockStored(KVCacheEvent):\n{body}\n\n"
        "class Unrelated:\n    pass\n"
    )


# The target's selection of upstream tests: one file of the pristine tree,
# and a test only the strict tier's last patch adds.
SELECTION = ("tests/test_pool.py", "tests/test_old.py::test_old_module_is_gone")


def make_target(root: Path, monkeypatch, patches=None, series=SERIES, strict=STRICT):
    """Target t at root: a path source with PRISTINE and these mails."""
    patches_dir = write_tree(root / "patches", PATCHES if patches is None else patches)
    (patches_dir / "series").write_text(series)
    (patches_dir / "series.strict").write_text(strict)
    write_tree(root / "pristine", PRISTINE)
    table = target_table('{ path = "pristine" }').replace(
        'upstream_tests = ["tests/test_a.py"]',
        f"upstream_tests = {json.dumps(list(SELECTION))}",
    )
    pins = write_pins(root, table)
    use_checkout(monkeypatch, pins)
    return targets.get_target("t")


def write_verdict(
    path: Path | None = None,
    tier="default",
    conformance=None,
    patched="passed",
    judged_here=True,
):
    """A verdict of target t's ``tier`` at ``path`` (default: where `test`
    writes it in this checkout's reports), judged on this checkout's tree
    unless ``judged_here`` is False (then it records none)."""
    from harness import cache
    from harness.series.judged import tree_key

    path = path or cache.report("t", tier, "ci")
    count = 3 if tier == "strict" else 2
    verdict = Verdict(
        target="t",
        tier=tier,
        selection="ci",
        pristine={"tests/test_pool.py::test_capacity": "passed"},
        patched={
            "tests/test_pool.py::test_capacity": patched,
            **{test: "passed" for test in ADDED_TESTS[:count]},
        },
        conformance=conformance or Conformance("passed", 4, 0),
        wall_seconds=83.0,
        provenance=tree_key(targets.get_target("t"), tier) if judged_here else {},
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(verdict.as_json(), indent=1))
    return path


def export(out: Path, *options: str, evidence: bool = False) -> int:
    """`python -m harness export` of target t, submitted by SUBMITTER; the
    fail-before-fix runs only with ``evidence``."""
    extra = [] if evidence else ["--no-fail-before-fix"]
    argv = ["export", "--target", "t", "--out", str(out), "--as", SUBMITTER]
    return cli.main([*argv, "--i-reviewed-every-line", *extra, *options])


def branch_from_mails(pristine: Path, mails: Path, branch: Path) -> Path:
    """The pull request's branch: the pristine tree committed, and the mails
    of ``mails`` applied with `git am --keep-non-patch`, as CONTRIBUTING.md
    says to make it."""
    shutil.copytree(pristine, branch)
    for args in (
        ["init", "--quiet"],
        ["add", "--all", "--force", "."],
        ["commit", "--quiet", "-m", "pristine"],
        [
            "am",
            "--keep-non-patch",
            *(str(p) for p in sorted(mails.glob("0*.patch"))[1:]),
        ],
    ):
        done = subprocess.run(
            ["git", "-c", "user.name=T", "-c", "user.email=t@t.name", *args],
            cwd=branch,
            capture_output=True,
            text=True,
            env={**os.environ, "GIT_CEILING_DIRECTORIES": str(branch.parent)},
        )
        assert done.returncode == 0, done.stderr
    return branch


def validation_command(body: str) -> list[str]:
    """The command of pr-body.md's Validation section (its first code block)."""
    validation = body.split("## Validation", 1)[1]
    return shlex.split(validation.split("```", 2)[1].replace("\\\n", " "))


def run_validation(body: str, branch: Path) -> subprocess.CompletedProcess:
    """Run the Validation command on the branch as a reviewer would: its
    variables set, `python` this interpreter."""
    words = validation_command(body)
    env = dict(os.environ)
    while "=" in words[0]:
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    assert words[:3] == ["python", "-m", "pytest"], words
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *words[3:]]
    return subprocess.run(command, cwd=branch, env=env, capture_output=True, text=True)
