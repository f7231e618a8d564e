"""A ported patch: the original's mail byte for byte, over a diff in the form
quilt refreshes with the repository's .quiltrc.

quilt refresh writes each file's diff with GNU `diff -p -u` under the labels
`a/PATH` and `b/PATH` (`/dev/null` for a side without the file, and for an
empty old file), without timestamps or `Index:` lines, the files in the
order the patch had them and new ones after it, sorted: the form
harness/series/patch_form.py checks. `port` writes each diff the same way,
so a ported patch is what `quilt refresh` would make of the same change, and
a patch ported onto its own release is the patch itself, byte for byte.
"""

import os
import re
from pathlib import Path

from harness import processes
from harness.errors import SeriesError
from harness.series.patch_paths import DIFF_STARTS
from harness.series.snapshot import FileState

# GNU diff as quilt runs it for refresh (QUILT_DIFF_OPTS="-p" and -u); in the
# C locale, so the function named after `@@` does not depend on the user's.
DIFF = ["diff", "-p", "-u"]
HUNK_NUMBERS = re.compile(rb"^@@ -\d+(,\d+)? \+\d+(,\d+)? @@", re.MULTILINE)


def mail_header(data: bytes) -> bytes:
    """Everything of a patch before its diff: the mail, message and `---`."""
    offset = 0
    for line in data.splitlines(keepends=True):
        if line.decode("utf-8", "surrogateescape").startswith(DIFF_STARTS):
            break
        offset += len(line)
    return data[:offset]


def file_diff(path: str, old: FileState, new: FileState, work: Path) -> bytes:
    """One file's diff as quilt refresh writes it; b"" where nothing changed."""
    sides = []
    for side, state, prefix in (("old", old, "a/"), ("new", new, "b/")):
        present = state is not None and (side == "new" or state[0] != b"")
        if not present:
            sides.append((os.devnull, "/dev/null"))
            continue
        file = work / side
        file.write_bytes(state[0])
        sides.append((str(file), prefix + path))
    (old_file, old_label), (new_file, new_label) = sides
    result = processes.run(
        [*DIFF, "--label", old_label, "--label", new_label, old_file, new_file],
        env={**os.environ, "LC_ALL": "C"},
    )
    if result.returncode not in (0, 1):
        reason = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise SeriesError(
            f"diff of {path} failed (status {result.returncode}): {reason}"
        )
    output = result.stdout.encode("utf-8", "surrogateescape")
    if output.startswith(b"Binary files "):
        raise SeriesError(f"{path} is binary once merged; a series carries text only")
    return output


def file_order(original: list[str], changed: list[str]) -> list[str]:
    """The changed files, in the order the original patch names them, then
    the others sorted (as quilt refresh orders a patch's files)."""
    first = [path for path in original if path in changed]
    return first + sorted(set(changed) - set(first))


def diff_part(patch: bytes) -> bytes:
    """The diff of a patch, without its mail."""
    return patch[len(mail_header(patch)) :]


def same_but_line_numbers(one: bytes, other: bytes) -> bool:
    """Whether two diffs differ in their hunks' line numbers alone."""
    return HUNK_NUMBERS.sub(b"@@", one) == HUNK_NUMBERS.sub(b"@@", other)
