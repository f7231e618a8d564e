"""What is read from the export's commits: the functions a change alters
outside tests/, whose calls the export measures."""

from support.trees import write_tree

from harness.submission.commits import changed_functions
from harness.submission.gitrepo import git

BEFORE = """\
def helper():
    return 1


class Scheduler:
    def step(self):
        return helper()

    def reset(self):
        return True
"""
AFTER = """\
def helper():
    return 1


class Scheduler:
    def step(self):
        return self._publish()

    def _publish(self):
        return helper()

    def reset( self ):
        return True
"""


def test_the_functions_a_change_alters_are_named_not_those_it_adds(tmp_path):
    repo = write_tree(
        tmp_path / "repo",
        {"vllm/s.py": BEFORE, "tests/test_s.py": "def test_x():\n    pass\n"},
    )
    git(repo, "init", "--quiet")
    git(repo, "add", ".")
    git(repo, "commit", "--quiet", "-m", "before")
    before = git(repo, "rev-parse", "HEAD").strip()
    (repo / "vllm/s.py").write_text(AFTER)
    (repo / "tests/test_s.py").write_text("def test_x():\n    assert 1\n")
    (repo / "vllm/new.py").write_text("def f():\n    pass\n")
    git(repo, "add", ".")
    git(repo, "commit", "--quiet", "-m", "after")
    # step changed; _publish and new.py's f added; reset only reformatted;
    # the test is no call of vLLM's
    assert changed_functions(repo, before, "HEAD") == ["vllm/s.py::Scheduler.step"]
