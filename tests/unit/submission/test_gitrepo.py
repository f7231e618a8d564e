"""git in export's scratch repository: a failure is one error, quoted short."""

import subprocess

import pytest

from harness import processes
from harness.errors import ExportError
from harness.submission import gitrepo


def test_a_failing_git_is_quoted_at_most_a_few_lines(tmp_path, monkeypatch):
    flood = "".join(
        f"error: cannot write file {n}: No space left\n" for n in range(90_000)
    )

    def failing(command, **options):
        return subprocess.CompletedProcess(command, 128, "", flood)

    monkeypatch.setattr(processes, "run", failing)
    with pytest.raises(ExportError) as raised:
        gitrepo.git(tmp_path, "am", "x.patch")
    message = str(raised.value)
    assert message.startswith(f"git am failed in {tmp_path}:\n    error: cannot write")
    assert len(message) < 2_200
    assert message.endswith("more characters not shown)")
