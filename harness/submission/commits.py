"""The commits an export makes in its scratch repository, and what is read
from them: the pristine tree as one commit with a fixed identity and date,
each patch applied with `git am --keep-non-patch` and made the submitter's,
the lines changed outside tests/, the functions changed there (whose calls
the export measures), the tests the Validation command can name on the
branch, and the mails (`git format-patch`), whose cover letter names the
release the series is made against (harness.submission.base), not the
scratch commit, which exists nowhere upstream.
"""

import ast
import re
from pathlib import Path

from harness import cache
from harness.errors import ExportError, OutputError
from harness.log import progress
from harness.series.model import Series
from harness.submission.base import Base
from harness.submission.evidence import patch_tests, test_functions
from harness.submission.gitrepo import BRANCH, git, message
from harness.submission.submitter import Identity, parse_identity, signed_message
from harness.targets import Target
from harness.trees.git_release import COMMIT_DATE, commit_message

SIGNED_OFF_LINE = re.compile(r"^Signed-off-by: .+ <[^>]+@[^>]+>\s*$", re.MULTILINE)


def commit_pristine(target: Target, pristine: Path, repo: Path) -> str:
    """Copy the pristine tree into repo and commit it; return the commit id."""
    progress(f"copying the pristine tree of {target.name} ({pristine})")
    try:
        cache.copy_tree(pristine, repo)
    except OSError as exc:  # shutil.Error too: a disk that fills up, say
        raise OutputError(f"cannot copy the pristine tree to {repo}: {exc}") from None
    progress(f"committing it in a scratch repository ({repo.parent})")
    git(repo, "init", "--quiet", f"--initial-branch={BRANCH}")
    # --force: the tree's own .gitignore must not keep files out of the base.
    git(repo, "add", "--all", "--force", ".")
    fixed_date = {
        "GIT_AUTHOR_DATE": COMMIT_DATE,
        "GIT_COMMITTER_DATE": COMMIT_DATE,
    }
    git(
        repo,
        "commit",
        "--quiet",
        "--no-verify",
        "-m",
        commit_message(target),
        env=fixed_date,
    )
    return git(repo, "rev-parse", "HEAD").strip()


def apply_as_commits(
    repo: Path,
    series: Series,
    submitter: Identity,
    last: int | None = None,
    skipped: int = 0,
) -> list[str]:
    """`git am --keep-non-patch` every patch of the series up to ``last``,
    leaving out the first ``skipped``, each made the submitter's (author and
    last sign-off); return the commits."""
    commits = []
    for number, entry in enumerate(series.entries[:last], 1):
        if number <= skipped:
            continue
        progress(f"git am [{number}/{len(series.entries)}] {entry.patch}")
        try:
            git(
                repo,
                "am",
                "--quiet",
                "--keep-non-patch",
                "--committer-date-is-author-date",
                f"-p{entry.strip}",
                str(series.patch_path(entry).resolve()),
            )
        except ExportError as exc:
            if skipped:
                raise ExportError(
                    f"patch {number} of {series.series_file.name} ({entry.patch}) "
                    f"does not apply to the pristine tree without the "
                    f"patch{'es' if skipped > 1 else ''} before it; export it "
                    f"with --stacked, on top of {'them' if skipped > 1 else 'it'}"
                ) from None
            raise ExportError(
                f"patch {entry.patch} from {series.series_file} does not go in "
                f"with git am --keep-non-patch: {exc}"
            ) from None
        original = message(repo, "HEAD")
        if not SIGNED_OFF_LINE.search(original):
            raise ExportError(
                f"patch {entry.patch} has no 'Signed-off-by: Name <email>' line; "
                f"upstream requires a DCO sign-off on every commit"
            )
        author = parse_identity(git(repo, "log", "-1", "--format=%an <%ae>").strip())
        author_date = git(repo, "log", "-1", "--format=%aI").strip()
        git(
            repo,
            "commit",
            "--amend",
            "--quiet",
            "--no-verify",
            "--cleanup=verbatim",
            f"--author={submitter}",
            "--file=-",
            env={"GIT_COMMITTER_DATE": author_date},
            stdin=signed_message(original, author, submitter),
        )
        commits.append(git(repo, "rev-parse", "HEAD").strip())
    return commits


def validation_tests(
    repo: Path, selection: tuple[str, ...], commits: list[str], part: bool = False
) -> tuple[str, ...]:
    """The tests the Validation command names: those of the selection that
    the exported branch holds (a test another patch adds is left out, or
    pytest would collect nothing), then each commit's own tests in a file the
    selection does not name. For a ``part`` of the series, only the
    selection's tests in the files its commits change: the rest of the
    selection tests what other commits change."""
    kept = [test for test in selection if _on_branch(repo, test)]
    if part:
        changed = git(repo, "diff", "--name-only", f"{commits[0]}~1", commits[-1])
        kept = [test for test in kept if test.split("::", 1)[0] in changed.split()]
    files = {test.split("::", 1)[0] for test in kept}
    for commit in commits:
        for test in patch_tests(repo, commit).node_ids:
            if test.split("::", 1)[0] not in files and test not in kept:
                kept.append(test)
    return tuple(kept)


def _on_branch(repo: Path, test: str) -> bool:
    """Whether the branch holds ``test`` (a path, or path::name[params])."""
    path, _, name = test.partition("::")
    try:
        text = git(repo, "show", f"{BRANCH}:{path}")
    except ExportError:
        return False
    if not name:
        return True
    try:
        return name.split("[", 1)[0] in test_functions(text)
    except SyntaxError:
        return False


def changed_lines_outside_tests(repo: Path, since: str, until: str) -> int:
    """Lines added and removed outside tests/ from ``since`` to ``until``, as
    `git diff --numstat` counts them (binary files left out)."""
    total = 0
    for line in git(repo, "diff", "--numstat", since, until).splitlines():
        added, removed, path = line.split("\t", 2)
        if not path.startswith("tests/") and added != "-":
            total += int(added) + int(removed)
    return total


def changed_functions(repo: Path, since: str, until: str) -> list[str]:
    """The functions outside tests/ whose code the commits ``since``..``until``
    change, as ``path::Class.method`` (or ``path::function``), in the order
    of the files and the code; a function they add is left out (it is
    reached through one they change), and so is one only reformatted."""
    listing = git(repo, "diff", "--name-only", since, until, "--", "*.py")
    changed = []
    for path in listing.splitlines():
        if path.startswith("tests/"):
            continue
        before = _functions(_source(repo, since, path))
        after = _functions(_source(repo, until, path))
        changed += [
            f"{path}::{name}"
            for name, code in after.items()
            if name in before and before[name] != code
        ]
    return changed


def _source(repo: Path, commit: str, path: str) -> str:
    try:
        return git(repo, "show", f"{commit}:{path}")
    except ExportError:  # not in that commit
        return ""


def _functions(text: str) -> dict[str, str]:
    """Function or ``Class.method`` -> its code without positions, in the
    Python source ``text`` (nothing where it is not Python)."""
    try:
        module = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef)
    found = {}
    for node in module.body:
        if isinstance(node, kinds):
            found[node.name] = ast.dump(node)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, kinds):
                    found[f"{node.name}.{item.name}"] = ast.dump(item)
    return found


def format_patches(
    repo: Path, base: str, start: str, mails: Path, submitter: Identity, named: Base
) -> None:
    """The mails of start..BRANCH; a part that follows earlier patches names
    them as prerequisites (`prerequisite-patch-id:`). The scratch base
    commit is named only where ``named`` pins a full commit id
    (`base-commit:` that id); otherwise the cover letter names the release
    in its text, and no `base-commit:` line."""
    # The cover letter is from the submitter, like the patches.
    git(
        repo,
        "format-patch",
        "--quiet",
        "--cover-letter",
        f"--base={base}",
        "--subject-prefix=PATCH",
        "-o",
        str(mails),
        f"{start}..{BRANCH}",
        env={
            "GIT_COMMITTER_NAME": submitter.name,
            "GIT_COMMITTER_EMAIL": submitter.email,
        },
    )
    letter = mails / "0000-cover-letter.patch"
    text = letter.read_text()
    trailer = f"base-commit: {base}\n"
    kept = f"base-commit: {named.commit}\n" if named.full else ""
    letter.write_text(text.replace(trailer, kept))
