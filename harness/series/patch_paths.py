"""The files one patch names, read as quilt's `patch` and `git apply` read it,
and the forms refused before either runs.

A patch may touch only regular files inside the tree it is applied to:

- no path that leaves the tree (absolute, or with a `..` component) and none
  inside `.git/` (a hook there runs code at the user's next commit) or
  quilt's own `.pc/`; a name is checked as both tools read it, C-quoted
  names (`"b/\\056git/..."`) decoded, and every path-bearing header counts:
  `---`, `+++`, `diff --git`, `rename`/`copy from`/`to`, `Index:`;
- no symlink or submodule (git's modes 120000, 160000) and no mode beyond
  644 or 755 (a set-uid bit).

And only what both tools apply alike: a binary patch (git applies it, quilt
refuses it), a context diff or a 0-byte patch (quilt applies it, git does
not), hunks of a file that overlap or are out of order (the same), and `---`
and `+++` naming two different files outside a git rename or copy (the
tools pick different ones) are refused. The files a patch creates and
deletes are listed too, so that a creation of a file the tree already has
(quilt writes into it, git refuses) is refused before either runs
(harness.series.apply).

Lines inside a hunk are the hunk's, as both tools count them from its `@@`
header, so a removed line that reads `-- ../x` is never taken for a header.
"""

import re
from dataclasses import dataclass, field

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,(\d+))? @@")
# Where the diff starts: what comes before is the mail (patch_form checks it).
DIFF_STARTS = ("--- ", "+++ ", "Index: ", "diff -", "@@ ")
MODES = ("100644", "100755")
MODE_LINES = ("old mode ", "new mode ", "deleted file mode ", "new file mode ")
RENAMES = ("rename from ", "rename to ", "copy from ", "copy to ")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13}


@dataclass
class PatchFiles:
    """What a patch names: tree paths (old and new sides), those it creates
    and deletes, and its problems as (line number, reason)."""

    paths: list[str] = field(default_factory=list)
    problems: list[tuple[int, str]] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)


def read_patch(data: bytes, strip: int) -> PatchFiles:
    """The tree paths a patch touches (``-p strip``) and why it is refused."""
    lines = [raw.decode("utf-8", "surrogateescape") for raw in data.split(b"\n")]
    start = next(
        (n for n, line in enumerate(lines) if line.startswith(DIFF_STARTS)), len(lines)
    )
    found = PatchFiles()
    reader = _Reader(found, strip)
    old_left = new_left = 0
    for number, line in enumerate(lines[start:], start + 1):
        if old_left > 0 or new_left > 0:
            kind = line[:1]
            if kind in (" ", ""):
                old_left, new_left = old_left - 1, new_left - 1
                continue
            if kind in ("-", "+", "\\"):
                old_left -= kind == "-"
                new_left -= kind == "+"
                continue
            old_left = new_left = 0  # ends early: the tools refuse it; read on
        if match := HUNK.match(line):
            old_left = int(match[2]) if match[2] is not None else 1
            new_left = int(match[3]) if match[3] is not None else 1
            reader.hunk(number, int(match[1]), old_left)
            continue
        reader.header(number, line)
    reader.end_section()
    if not found.paths and not found.problems:
        found.problems.append(
            (1, "names no file: quilt applies it as nothing, git apply refuses it")
        )
    return found


class _Reader:
    """The header lines of a patch, one file section at a time."""

    def __init__(self, found: PatchFiles, strip: int):
        self.found, self.strip = found, strip
        self.old: str | None = None  # the pending '---' name
        self.git_names: list[str] = []  # the tree paths `diff --git` names
        self.renamed = False  # rename or copy lines in this git section
        self.has_pair = False  # a ---/+++ pair in this git section
        self.new_file = self.deleted_file = False  # git's mode lines say so
        self.hunks_end = 0  # the old side's line after the last hunk of a file

    def header(self, number: int, line: str) -> None:
        if line.startswith("diff --git "):
            self.end_section()
            self.git_names = self._git_line(number, line[len("diff --git ") :])
        elif line.startswith("--- "):
            self.old = self._name(number, line[4:], "---")
        elif line.startswith("+++ "):
            self._pair(number, self.old, self._name(number, line[4:], "+++"))
            self.old, self.hunks_end = None, 0
        elif line.startswith(RENAMES):
            self.renamed = True
            name = _unquote(line.split(" ", 2)[2])
            self._check(number, name)
            self.found.paths.append(name)
            if line.startswith("rename from "):
                self.found.deleted.append(name)
            elif line.startswith(("rename to ", "copy to ")):
                self.found.created.append(name)
        elif line.startswith(MODE_LINES):
            mode = line.rsplit(" ", 1)[-1]
            if mode not in MODES:
                self._problem(number, _mode_reason(mode))
            self.new_file |= line.startswith("new file mode ")
            self.deleted_file |= line.startswith("deleted file mode ")
        elif line.startswith("GIT binary patch") or (
            line.startswith("Binary files ") and line.endswith(" differ")
        ):
            self._problem(
                number,
                "a binary patch: git apply applies it and quilt does not, so the "
                "tree would depend on the tool; ship the file another way",
            )
        elif line.startswith("*** ") or line.startswith("***************"):
            self._problem(
                number,
                "a context diff: quilt applies it and git apply does not; use a "
                "unified diff (quilt refresh)",
            )
        elif line.startswith("Index: "):
            self._check(number, _unquote(line[len("Index: ") :].strip()))

    def hunk(self, number: int, start: int, count: int) -> None:
        """Hunks of a file in order, none overlapping the one before: git
        apply refuses others, quilt's patch applies them where they fit."""
        begin = start if count else start + 1
        if begin < self.hunks_end:
            self._problem(
                number,
                "a hunk that overlaps or comes before the one above it: git apply "
                "refuses it and quilt applies it; make one hunk of them",
            )
        self.hunks_end = max(self.hunks_end, begin + count)

    def end_section(self) -> None:
        """A git section with no ---/+++ pair (a mode change, an empty new
        file, a pure rename) touches what its `diff --git` line names."""
        if self.git_names and not self.has_pair and not self.renamed:
            self.found.paths.extend(self.git_names)
            if self.new_file:
                self.found.created.extend(self.git_names)
            if self.deleted_file:
                self.found.deleted.extend(self.git_names)
        self.git_names, self.renamed, self.has_pair = [], False, False
        self.new_file = self.deleted_file = False

    def _name(self, number: int, text: str, marker: str) -> str | None:
        """The tree path of a ---/+++ line, None for /dev/null."""
        name = _unquote(text.split("\t", 1)[0].rstrip())
        if name == "/dev/null" or re.match(r"/dev/null\s", name):
            return None
        self._check(number, name)
        if not text.startswith('"'):  # GNU patch may end a name at a space
            for token in _tokens(text):
                if token != name:
                    self._check(number, token)
        parts = name.split("/")[self.strip :]
        if not parts or not parts[-1]:
            self._problem(
                number,
                f"'{marker} {name}' names no file once -p{self.strip} strips it",
            )
            return None
        if parts[0] == ".pc":
            self._problem(number, f"{name!r}: inside .pc/, quilt's bookkeeping")
        return "/".join(parts)

    def _pair(self, number: int, old: str | None, new: str | None) -> None:
        self.has_pair = True
        if old is None and new is not None:
            self.found.created.append(new)
        if new is None and old is not None:
            self.found.deleted.append(old)
        for path in (old, new):
            if path is not None and path not in self.found.paths:
                self.found.paths.append(path)
        if old and new and old != new and not self.renamed:
            self._problem(
                number,
                f"'---' and '+++' name two files ({old}, {new}) outside a git "
                f"rename: quilt and git apply would patch different ones",
            )

    def _git_line(self, number: int, rest: str) -> list[str]:
        """Check every name a `diff --git` line can be read as; return the
        tree path it names when both halves agree, as git reads it."""
        tokens = _tokens(rest)
        for token in tokens:
            self._check(number, token)
        self._check(number, rest)
        if len(tokens) == 2:
            halves = [token.split("/")[self.strip :] for token in tokens]
            if halves[0] == halves[1] and halves[0]:
                return ["/".join(halves[0])]
        for split in range(1, len(rest)):
            if rest[split] != " ":
                continue
            left, right = rest[:split], rest[split + 1 :]
            halves = [left.split("/")[self.strip :], right.split("/")[self.strip :]]
            if halves[0] == halves[1] and halves[0]:
                return ["/".join(halves[0])]
        return []

    def _check(self, number: int, name: str) -> bool:
        reason = unsafe_path(name)
        if reason:
            self._problem(number, f"{name!r}: {reason}")
        return reason is None

    def _problem(self, number: int, reason: str) -> None:
        self.found.problems.append((number, reason))


def unsafe_path(name: str) -> str | None:
    """Why a path a patch names could reach outside the tree's own files."""
    if name.startswith("/") and name != "/dev/null":
        return "an absolute path; a patch may touch only files inside the tree"
    parts = name.split("/")
    if ".." in parts:
        return "leads out of the tree (a '..' component)"
    for part in parts:
        if part.rstrip(" .").casefold() == ".git":
            return (
                "inside .git/, git's own files (a hook there would run at the "
                "next commit); a patch may touch only the tree's files"
            )
    if any(part in ("", ".") for part in parts[:-1]) or parts[-1] == ".":
        return "an empty or '.' path component"
    return None


def _mode_reason(mode: str) -> str:
    if mode == "120000":
        return "makes a symlink (mode 120000), which could point out of the tree"
    if mode == "160000":
        return "a submodule (mode 160000), which neither tool can apply alike"
    return f"mode {mode}: a patch may make files 100644 or 100755 only"


def _unquote(text: str) -> str:
    """A name as git and GNU patch read it: a C-quoted one decoded."""
    if not (len(text) >= 2 and text.startswith('"') and text.endswith('"')):
        return text
    out = bytearray()
    body = text[1:-1]
    index = 0
    while index < len(body):
        char = body[index]
        if char == "\\" and index + 1 < len(body):
            following = body[index + 1]
            octal = re.match(r"[0-7]{1,3}", body[index + 1 :])
            if octal:
                out.append(int(octal[0], 8) & 0xFF)
                index += 1 + len(octal[0])
                continue
            out += (
                bytes([_ESCAPES[following]])
                if following in _ESCAPES
                else (following.encode("utf-8", "surrogateescape"))
            )
            index += 2
            continue
        out += char.encode("utf-8", "surrogateescape")
        index += 1
    return out.decode("utf-8", "surrogateescape")


def _tokens(rest: str) -> list[str]:
    """The whitespace-separated words of a line, a C-quoted one decoded."""
    return [_unquote(token) for token in re.findall(r'"(?:[^"\\]|\\.)*"|\S+', rest)]
