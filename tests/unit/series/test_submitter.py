import re

import pytest
from support import REPO_ROOT

from harness.errors import SubmitterError
from harness.series.submitter import (
    PROJECT_IDENTITIES,
    Identity,
    parse_identity,
    placeholder_reason,
    resolve_submitter,
    signed_message,
)

JANE = Identity("Jane Doe", "jane@example.org")
ADA = Identity("Ada Lovelace", "ada@example.org")
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
        ("Jane Doe <jane@example.org>", JANE),
        ("  Jane Doe   <jane@example.org> ", JANE),
        (
            "Zoë Ñandú <zoe@mail.example.net>",
            Identity("Zoë Ñandú", "zoe@mail.example.net"),
        ),
        ("jane@example.org", None),
        ("<jane@example.org>", None),
        ("Jane Doe <jane>", None),
        ("Jane Doe <jane@>", None),
        ("Jane Doe <jane@@example.org>", None),
        ("Jane <Doe> <jane@example.org>", None),
        ("Jane\tDoe <jane@example.org>", None),
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
    ],
    ids=["none", "no-email", "placeholder", "malformed", "reserved"],
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
