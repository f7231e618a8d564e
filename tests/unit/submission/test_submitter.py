import re

import pytest
from support import REPO_ROOT

from harness.errors import SubmitterError
from harness.submission.submitter import (
    PROJECT_IDENTITIES,
    Identity,
    parse_identity,
    placeholder_reason,
    resolve_submitter,
    signed_message,
)

JANE = Identity("Jane Doe", "jane@doe.name")
ADA = Identity("Ada Lovelace", "ada@lovelace.name")
PLACEHOLDER = PROJECT_IDENTITIES[0]


@pytest.fixture
def git_config(tmp_path, monkeypatch):
    """git's global configuration as this test writes it; no system one."""
    path = tmp_path / "gitconfig"
    path.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.chdir(tmp_path)
    return path


@pytest.mark.parametrize(
    ("text", "identity"),
    [
        ("Jane Doe <jane@doe.name>", JANE),
        ("  Jane Doe   <jane@doe.name> ", JANE),
        (
            "Zoë Ñandú <zoe@mail.example.net>",
            Identity("Zoë Ñandú", "zoe@mail.example.net"),
        ),
        ("jane@doe.name", None),
        ("<jane@doe.name>", None),
        ("Jane Doe <jane>", None),
        ("Jane Doe <jane@>", None),
        ("Jane Doe <jane@@example.org>", None),
        ("Jane <Doe> <jane@doe.name>", None),
        ("Jane\tDoe <jane@doe.name>", None),
    ],
)
def test_parse_identity(text, identity):
    assert parse_identity(text) == identity


@pytest.mark.parametrize(
    ("identity", "reason"),
    [
        (JANE, None),
        (Identity("Jane", "jane@users.noreply.github.com"), None),
        (PLACEHOLDER, "this project's placeholder identity"),
        (Identity(PLACEHOLDER.name, "real@example.org"), "placeholder"),
        (Identity("Jane", "developers@VLLM-kv-series.invalid"), "placeholder"),
        (Identity("Jane", "jane@company.test"), "reserved domain (company.test)"),
        (Identity("Jane", "jane@box.example"), "reserved domain"),
        (Identity("Jane", "jane@localhost"), "reserved domain"),
        (Identity("You", "you@example.org"), "reserved domain (example.org)"),
        (Identity("You", "you@EXAMPLE.com."), "reserved domain (example.com)"),
        (Identity("You", "you@mail.example.net"), "reserved domain"),
        (Identity("You", "you@router.home.arpa"), "reserved domain"),
        (Identity("You", "you@printer.local"), "reserved domain"),
        (Identity("You", "you@address"), "a domain without a dot"),
        (Identity("You", "you@myexample.org"), None),
        (Identity("Real", "real@[127.0.0.1]"), "an IP literal ([127.0.0.1])"),
        (Identity("Real", "real@[IPv6:::1]"), "an IP literal ([ipv6:::1])"),
        (Identity("Real", "real@[IPv6:2001:db8::1]"), "an IP literal"),
        (Identity("Real", "real@[10.0.0.1]."), "an IP literal ([10.0.0.1])"),
        (Identity("Real", "real@192.0.2.7"), "an IP literal (192.0.2.7)"),
        (Identity("Real", "real@::1"), "an IP literal (::1)"),
        (Identity("Real", "real@1.2.3.example.com"), "reserved domain"),
        (Identity("Real", "real@10.0.0.1.nip.io"), None),
    ],
)
def test_placeholder_identities_name_no_person(identity, reason):
    found = placeholder_reason(identity)
    if reason is None:
        assert found is None
    else:
        assert reason in found


def test_every_patch_of_the_project_carries_its_placeholder_identity():
    """The patches in patches/ keep the project identity that export refuses
    to submit as; if they change it, PROJECT_IDENTITIES must follow."""
    authors = {
        match
        for path in (REPO_ROOT / "patches").rglob("*.patch")
        for match in re.findall(r"^From: (.+)$", path.read_text(), re.MULTILINE)
    }
    assert authors
    assert {parse_identity(author) for author in authors} <= set(PROJECT_IDENTITIES)


@pytest.mark.parametrize(
    ("option", "shown"),
    [
        ("Jane \udcff Doe <jane@doe.name>", "byte 0xff at position 6"),
        ("Jane <jane\udcc3@doe.name>", "byte 0xc3 at position 11"),
        ("Jane <jane@doe\ud800.name>", "a character at position 15"),
    ],
)
def test_an_identity_that_is_not_utf8_is_refused_before_any_work(option, shown):
    with pytest.raises(SubmitterError) as raised:
        resolve_submitter(option)
    assert str(raised.value) == (
        f"--as is not UTF-8 text ({shown}); git writes the identity into every "
        f"mail; pass --as 'NAME <EMAIL>' with your own name and address"
    )


def test_a_control_character_in_the_address_is_not_an_identity():
    assert parse_identity("Jane <jane\x01@doe.name>") is None


def test_the_documented_example_identity_is_refused_if_copied_as_it_is():
    for name in ("docs/fork.md", "CONTRIBUTING.md"):
        text = (REPO_ROOT / name).read_text()
        examples = re.findall(r'--as "([^"]*)"', text)
        assert examples, f"{name} shows no --as example"
        for example in examples:
            with pytest.raises(SubmitterError):
                resolve_submitter(example)


def test_submitter_from_the_option_wins_over_git(git_config):
    git_config.write_text(f"[user]\n\tname = {ADA.name}\n\temail = {ADA.email}\n")
    assert resolve_submitter(str(JANE)) == JANE
    assert resolve_submitter(None) == ADA


@pytest.mark.parametrize(
    ("option", "config", "message"),
    [
        (None, "", "no submitter identity: git's user.name and user.email are not"),
        (None, "[user]\n\tname = Jane Doe\n", "are not both set"),
        (
            None,
            f"[user]\n\tname = {PLACEHOLDER.name}\n\temail = {PLACEHOLDER.email}\n",
            f"git's user.name and user.email gives {PLACEHOLDER}, this project's "
            "placeholder identity, not a person who can sign the patches off",
        ),
        ("Jane Doe", "", "--as gives 'Jane Doe', which is not 'Name <email>'"),
        (
            "Jane <jane@example.invalid>",
            "",
            "an address at a reserved domain (example.invalid), which no mail reaches",
        ),
        (
            "Real <real@[127.0.0.1]>",
            "",
            "--as gives Real <real@[127.0.0.1]>, an address at an IP literal "
            "([127.0.0.1]), a machine rather than a mail domain, which names no "
            "one, not a person who can sign the patches off; pass --as",
        ),
    ],
    ids=["none", "no-email", "placeholder", "malformed", "reserved", "ip-literal"],
)
def test_no_person_to_sign_off_is_one_line(git_config, option, config, message):
    git_config.write_text(config)
    with pytest.raises(SubmitterError) as raised:
        resolve_submitter(option)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


MESSAGE = "Report the boundary.\n\nFixes #58119\n\n"


@pytest.mark.parametrize(
    ("trailers", "author", "expected"),
    [
        (
            f"Co-authored-by: Claude <c@x.org>\nSigned-off-by: {PLACEHOLDER}\n",
            PLACEHOLDER,
            ["Co-authored-by: Claude <c@x.org>", f"Signed-off-by: {JANE}"],
        ),
        (
            f"Co-authored-by: Claude <c@x.org>\nSigned-off-by: {ADA}\n",
            ADA,
            [
                "Co-authored-by: Claude <c@x.org>",
                f"Co-authored-by: {ADA}",
                f"Signed-off-by: {ADA}",
                f"Signed-off-by: {JANE}",
            ],
        ),
        (
            f"Signed-off-by: {JANE}\nSigned-off-by: {ADA}\n",
            JANE,
            [f"Signed-off-by: {ADA}", f"Signed-off-by: {JANE}"],
        ),
    ],
    ids=["placeholder-author", "person-author", "submitter-signed-before"],
)
def test_signed_message_ends_with_the_submitters_sign_off(trailers, author, expected):
    signed = signed_message(MESSAGE + trailers, author, JANE)
    body, block = signed.rstrip("\n").rsplit("\n\n", 1)
    assert body == MESSAGE.rstrip("\n")
    assert block.splitlines() == expected


def test_signed_message_without_trailers_gets_a_trailer_paragraph():
    assert signed_message("Subject line\n\nBody.\n", None, JANE) == (
        f"Subject line\n\nBody.\n\nSigned-off-by: {JANE}\n"
    )


@pytest.mark.parametrize(
    "identity",
    [
        "Jane \udcff Doe <jane@doe.name>",
        "You <you@example.org>",
        "Real <real@[127.0.0.1]>",
        "Real <real@[IPv6:::1]>",
    ],
)
def test_export_refuses_such_an_identity_before_any_work(
    tmp_path, monkeypatch, cache, capsys, identity
):
    from support.export import make_target

    from harness import cli

    make_target(tmp_path, monkeypatch)
    out = tmp_path / "mails"
    argv = ["export", "--target", "t", "--out", str(out), "--as", identity]
    assert cli.main([*argv, "--i-reviewed-every-line"]) == SubmitterError.exit_code
    err = capsys.readouterr().err
    assert err.startswith("error: --as ") and err.count("\n") == 1, err
    assert not out.exists()
    assert not cache.exists()
