"""README.md and harness/targets.toml agree on which vLLM release `main` is.

The README names main's release in a few statements (`MAIN_STATEMENTS`): what
the series is made against, and what `tox -e vllm-main` fetches; and main's
description in targets.toml names it too. The series lint reports each
whose version is not the one `[targets.main]` pins, with its file and line,
and each statement the README no longer makes, so that rewording it updates
this list instead of losing the check. Moving main to a new release is then:
the pin, and the versions these lines name.
"""

import re
from pathlib import Path

from harness.checkout import PIN_FILE
from harness.targets import SdistSource, Target

VERSION = r"(\d+(?:\.\d+)+)"
# What each statement says, and the words that make it (any run of spaces or
# a line break between words); the version is main's.
MAIN_STATEMENTS = {
    "what the series is made against": re.compile(
        r"series\s+\(`patches/`\)\s+against\s+vLLM\s+" + VERSION
    ),
    "what `tox -e vllm-main` fetches": re.compile(
        r"`tox\s+-e\s+vllm-main`\s+fetches\s+vLLM\s+" + VERSION
    ),
}
README = "README.md"


def main_release_errors(root: Path, targets: dict[str, Target]) -> list[str]:
    """Where README.md or main's description names another release than
    main's pin; nothing where there is no main sdist target or no README."""
    main = targets.get("main")
    if main is None or not isinstance(main.source, SdistSource):
        return []
    pinned = main.source.version
    pin = f"{PIN_FILE} pins {main.source.name}=={pinned} for main"
    errors = []
    readme = root / README
    if readme.is_file():
        text = readme.read_text(errors="replace")
        for what, statement in MAIN_STATEMENTS.items():
            found = list(statement.finditer(text))
            if not found:
                errors.append(
                    f"{README}: no longer says {what} (/{statement.pattern}/), "
                    f"which the lint checks against main's pin; say it again, or "
                    f"change MAIN_STATEMENTS in harness/series/readme_pins.py"
                )
            errors += [
                f"{README}:{_line(text, match.start(1))}: names vLLM {match[1]} "
                f"as {what}, but {pin}"
                for match in found
                if match[1] != pinned
            ]
    errors += _description_errors(root, main, pinned, pin)
    return errors


def _description_errors(root: Path, main: Target, pinned: str, pin: str) -> list:
    """A release in main's description that is not its pin."""
    named = re.findall(r"\b" + VERSION + r"\b", main.description)
    if all(version == pinned for version in named):
        return []
    lines = (root / PIN_FILE).read_text(errors="replace").splitlines()
    start = next((n for n, line in enumerate(lines) if line == "[targets.main]"), 0)
    number = next(
        (
            n + 1
            for n, line in enumerate(lines)
            if n > start and line.startswith("description")
        ),
        start + 1,
    )
    other = next(version for version in named if version != pinned)
    return [f"{PIN_FILE}:{number}: main's description names {other}, but {pin}"]


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1
