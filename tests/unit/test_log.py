"""Text the harness read from a file it does not own, as it prints it: what
the text holds, and nothing that adds a line or drives the terminal."""

import unicodedata

import pytest

from harness.log import shown

pytestmark = pytest.mark.hostile


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        ("strict", "strict"),
        ("\x1b]0;PWNED\x07\x1b[31mRED\rFAKE", "\\x1b]0;PWNED\\x07\\x1b[31mRED\\rFAKE"),
        ("tier\nRECORD: all ok", "tier\\nRECORD: all ok"),
        ("\x85\u2028\u2029", "\\x85\\u2028\\u2029"),
        ("abc\u202edef", "abc\\u202edef"),
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("a\\x1b", "a\\\\x1b"),
        ("bytes \udcff", "bytes \\udcff"),
        ("café über 東京", "café über 東京"),
    ],
    ids=[
        "plain",
        "terminal-escapes",
        "a-line-of-its-own",
        "unicode-line-breaks",
        "bidi-override",
        "zero-width",
        "a-backslash",
        "not-utf8",
        "letters",
    ],
)
def test_what_could_drive_a_terminal_is_escaped_the_rest_kept(text, printed):
    assert shown(text) == printed


def test_escaped_text_is_one_line_without_a_control_or_format_character():
    every = shown("".join(map(chr, range(0x3000))) + "\udc80")
    assert every.splitlines() == [every]
    unsafe = ("Cc", "Cf", "Cs", "Zl", "Zp")  # unassigned and private use stay
    assert not [char for char in every if unicodedata.category(char) in unsafe]
