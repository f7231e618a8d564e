"""git in the scratch repository an export builds, with the user's configuration
left out, so that the same series gives the same commits on every machine.

The repository holds the pristine tree as one commit on the branch `BRANCH`,
made with a fixed identity and date, and one commit per patch on top of it.
"""

import os
import textwrap
from pathlib import Path

from harness import processes
from harness.errors import ExportError, excerpt

# The identity and date of the scratch commits (the committer of every patch
# commit too), so that the pristine base commit, and with it the patches'
# commits, is the same wherever it is made: `fetch --git`'s.
from harness.trees.git_release import IDENTITY as EXPORT_IDENTITY

# The branch the patches are committed on; the fail-before-fix commands name
# the commits relative to it, as CONTRIBUTING.md's `git checkout -b` does.
BRANCH = "kv-events"


def git(
    repo: Path, *args: str, env: dict | None = None, stdin: str | None = None
) -> str:
    """Run git in repo with the user's configuration left out; return stdout."""
    name, email = EXPORT_IDENTITY
    isolated = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CEILING_DIRECTORIES": str(repo.resolve().parent),
        **(env or {}),
    }
    command = ["git", "-c", f"user.name={name}", "-c", f"user.email={email}"]
    result = processes.run([*command, *args], cwd=repo, env=isolated, input=stdin)
    if result.returncode != 0:
        said = [
            line
            for line in (result.stderr or result.stdout).splitlines()
            if line.strip() and not line.startswith("hint:")
        ]
        detail = excerpt("\n".join(said)) or "no output"
        raise ExportError(
            f"git {args[0]} failed in {repo}:\n{textwrap.indent(detail, '    ')}"
        )
    return result.stdout


def relative_ref(number: int, count: int) -> str:
    """The ref of patch ``number`` (1-based) of ``count`` on BRANCH."""
    back = count - number
    return f"{BRANCH}~{back}" if back else BRANCH


def message(repo: Path, commit: str) -> str:
    return git(repo, "log", "-1", "--format=%B", commit)
