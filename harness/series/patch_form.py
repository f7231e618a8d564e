"""The form of one patch file: a mail that `git am` takes, in quilt's refreshed form.

- a mail that `git am --keep-non-patch` takes: From:, Date: and Subject:
  headers at the top, the subject starting with at least one upstream tag
  such as [Bugfix] or [KV Events], and a Signed-off-by: line before the diff;
- the diff in quilt's refreshed form (-p ab --no-timestamps --no-index, as
  .quiltrc sets): `--- a/` and `+++ b/` headers without timestamps, no
  `Index:`, `diff --git` or `index` lines, hunks whole, and no trailing
  whitespace on added lines.

Every error names the file, and the line where there is one.
"""

import email.utils
import re
from pathlib import Path

MAIL_HEADER = re.compile(r"^(?P<name>[A-Za-z-]+): ?(?P<value>.*)$")
AUTHOR = re.compile(r".+ <[^<>@\s]+@[^<>\s]+>$")
# One or more bracketed upstream tags, then a space and the summary; a leading
# [PATCH ...] group is allowed but is not a tag.
SUBJECT = re.compile(
    r"^(\[PATCH[^\]]*\] *)?(\[(?!PATCH\b)[^\[\]]*[^\[\]\s][^\[\]]*\])+ \S"
)
SIGNED_OFF = re.compile(r"^Signed-off-by: .+ <[^<>@\s]+@[^<>\s]+>$")
HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
TIMESTAMP = re.compile(r"\t|\s\d{4}-\d\d-\d\d[ T]\d\d:\d\d")
REFRESH = "refresh it with quilt (.quiltrc: -p ab --no-timestamps --no-index)"


def check_patch(path: Path, shown: str, strip: int = 1) -> tuple[list[str], list]:
    """Errors in one patch file, and the files its diff touches (tree paths)."""
    lines = path.read_text(errors="replace").splitlines()
    start = next((n for n, line in enumerate(lines) if _starts_diff(line)), len(lines))
    errors = check_mail_header(lines[:start], shown)
    diff_errors, touched = check_diff(lines, start, shown, strip)
    return errors + diff_errors, touched


def _starts_diff(line: str) -> bool:
    return line.startswith(("--- ", "+++ ", "Index: ", "diff -", "@@ "))


def check_mail_header(header: list[str], shown: str) -> list[str]:
    """From:, Date:, Subject: at the top, a tagged subject, a sign-off."""
    errors = []
    fields: dict[str, tuple[int, str]] = {}
    for number, line in enumerate(header, 1):
        if not line.strip():
            break
        match = MAIL_HEADER.match(line)
        if match:
            fields.setdefault(match["name"].lower(), (number, match["value"]))
    hint = "(git am reads the mail headers at the top of the patch)"
    if "from" not in fields:
        errors.append(f"{shown}:1: no 'From: Name <email>' header {hint}")
    elif not AUTHOR.match(fields["from"][1].strip()):
        number, value = fields["from"]
        errors.append(f"{shown}:{number}: From: {value!r} is not 'Name <email>'")
    if "date" not in fields:
        errors.append(f"{shown}:1: no 'Date:' header {hint}")
    else:
        number, value = fields["date"]
        try:
            email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            errors.append(f"{shown}:{number}: Date: {value!r} is not an RFC 2822 date")
    if "subject" not in fields:
        errors.append(f"{shown}:1: no 'Subject:' header {hint}")
    elif not SUBJECT.match(fields["subject"][1]):
        number, value = fields["subject"]
        errors.append(
            f"{shown}:{number}: the subject {value!r} does not start with an "
            f"upstream tag such as [Bugfix], [Core], [KV Events], [Misc], [Perf]"
        )
    if not any(SIGNED_OFF.match(line.rstrip()) for line in header):
        errors.append(
            f"{shown}: no 'Signed-off-by: Name <email>' line before the diff "
            f"(the DCO sign-off upstream requires)"
        )
    return errors


def check_diff(
    lines: list[str], start: int, shown: str, strip: int
) -> tuple[list[str], list[str]]:
    """Quilt's refreshed form, whole hunks, no trailing whitespace added."""
    errors: list[str] = []
    touched: list[str] = []
    old_left = new_left = 0
    old_header = False  # a '---' line waits for its '+++'
    old_path = None  # its path, None for /dev/null
    has_file = False
    for number, line in enumerate(lines[start:], start + 1):
        where = f"{shown}:{number}"
        if old_left > 0 or new_left > 0:
            kind = line[:1]
            if kind in (" ", ""):
                old_left, new_left = old_left - 1, new_left - 1
                continue
            if kind == "-":
                old_left -= 1
                continue
            if kind == "+":
                new_left -= 1
                if line[1:] != line[1:].rstrip():
                    errors.append(f"{where}: trailing whitespace on an added line")
                continue
            if kind == "\\":
                continue
            errors.append(f"{where}: the hunk above ends early")
            old_left = new_left = 0
        if line.startswith("\\"):
            continue
        if line.startswith("Index: "):
            errors.append(f"{where}: an Index: line; {REFRESH}")
        elif line.startswith("diff -"):
            errors.append(f"{where}: a 'diff' line (git's form); {REFRESH}")
        elif has_file and line.startswith("index "):
            errors.append(f"{where}: an 'index' line (git's form); {REFRESH}")
        elif line.startswith("--- "):
            old_header = True
            old_path = _diff_path(line, "--- ", "a/", where, errors)
        elif line.startswith("+++ "):
            new_path = _diff_path(line, "+++ ", "b/", where, errors)
            if not old_header:
                errors.append(f"{where}: '+++' without a '---' line before it")
            elif path := _tree_path(new_path or old_path or "", strip):
                touched.append(path)
            has_file, old_header = True, False
        elif match := HUNK.match(line):
            if not has_file:
                errors.append(f"{where}: a hunk without '---'/'+++' headers")
            old_left = int(match[1]) if match[1] is not None else 1
            new_left = int(match[2]) if match[2] is not None else 1
    if old_left > 0 or new_left > 0:
        errors.append(f"{shown}:{len(lines)}: the last hunk is cut short")
    if not has_file:
        errors.append(f"{shown}: no diff in the patch")
    return errors, touched


def _diff_path(line: str, marker: str, prefix: str, where: str, errors: list):
    """The path of a ---/+++ line, None for /dev/null; bad forms are errors."""
    name = line[len(marker) :]
    if TIMESTAMP.search(name):
        errors.append(f"{where}: a timestamp on the '{marker.strip()}' line; {REFRESH}")
        name = re.split(r"\t|\s\d{4}-", name, maxsplit=1)[0]
    if name == "/dev/null":
        return None
    if not name.startswith(prefix):
        errors.append(
            f"{where}: '{marker}{name}' does not start with '{marker}{prefix}'; "
            f"{REFRESH}"
        )
    return name


def _tree_path(name: str, strip: int) -> str | None:
    parts = name.split("/")[strip:]
    return "/".join(parts) if parts else None
