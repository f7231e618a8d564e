"""What an export names as its base: the release's tag and the commit its
sdist records, and a `base-commit:` only for a pinned full commit id."""

from support.trees import make_target, write_tree

from harness.submission.base import Base, recorded_commit, release_base
from harness.targets import GitSource

VERSION_FILE = (
    "__version__ = version = '0.34.0'\n__commit_id__ = commit_id = 'g62d4bc3c7'\n"
)


def test_the_version_file_gives_the_commit_without_its_g(tmp_path):
    write_tree(tmp_path, {"vllm/_version.py": VERSION_FILE})
    assert recorded_commit(tmp_path) == "62d4bc3c7"
    assert recorded_commit(tmp_path / "none") is None
    write_tree(tmp_path, {"vllm/_version.py": "__commit_id__ = None\n"})
    assert recorded_commit(tmp_path) is None


def test_a_release_is_named_by_its_tag_and_commit_a_pinned_commit_in_full(tmp_path):
    base = Base("vLLM 0.34.0", "v0.34.0", "62d4bc3c7")
    assert base.named() == "v0.34.0 (62d4bc3c7)" and not base.full
    assert Base("vLLM x").named() == "vLLM x"
    commit = "0123456789abcdef0123456789abcdef01234567"
    pinned = release_base(
        make_target(GitSource("https://g.example/v", commit)), tmp_path
    )
    assert pinned.full and pinned.named() == f"vLLM {commit[:12]} ({commit})"
