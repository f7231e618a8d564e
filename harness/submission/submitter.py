"""The person who submits the series upstream: author and signer of every mail.

vLLM's DCO check wants each commit's author to sign it off, and vLLM's
AGENTS.md wants a human submitter who can defend the change. The patches in
patches/ carry this project's placeholder identity, which names no person, so
`export` makes the submitter the author of every mail and adds their
`Signed-off-by:` last. The submitter is named with `--as "Name <email>"`, or
else is git's configured user.name and user.email. A placeholder identity,
one that is not `Name <email>` in UTF-8 text, or an address no mail reaches
(a reserved domain such as example.org, a domain without a dot, an IP
literal such as [127.0.0.1] or [IPv6:::1]) is refused before any work.

A patch's original author is credited with a `Co-authored-by:` trailer when
it is a person (not a placeholder) other than the submitter; sign-offs by a
placeholder are dropped, since they certify nothing, and real ones are kept
above the submitter's, as a chain of custody.
"""

import ipaddress
import re
from dataclasses import dataclass

from harness import processes
from harness.errors import SubmitterError
from harness.submission.gitrepo import EXPORT_IDENTITY


@dataclass(frozen=True)
class Identity:
    name: str
    email: str

    def __str__(self) -> str:
        return f"{self.name} <{self.email}>"


# The identities this project uses that name no person: the one the patches
# in patches/ carry, the one its own commits use, and that of export's
# scratch commits.
PROJECT_IDENTITIES = (
    Identity(
        "Seed 04eb14b5 maintainers",
        "maintainers@users.noreply.a-seed-04eb14b5.example",
    ),
    Identity("vllm-kv-series developers", "developers@vllm-kv-series.invalid"),
    Identity(*EXPORT_IDENTITY),
)
# Top-level domains reserved so that no mail reaches them (RFC 2606, RFC 6761,
# RFC 6762's .local, RFC 9476's .alt, ICANN's .internal), and the second-level
# domains reserved for examples (RFC 2606, RFC 8375's home.arpa): a sign-off
# with such an address certifies nothing.
RESERVED_DOMAINS = (
    "example",
    "invalid",
    "localhost",
    "test",
    "local",
    "alt",
    "internal",
)
RESERVED_NAMES = ("example.com", "example.net", "example.org", "home.arpa")
_IDENTITY = re.compile(r"(?P<name>[^<>]*?)\s*<(?P<email>[^<>\s]+)>")
_EMAIL = re.compile(r"[^@\s]+@[^@\s.]+(\.[^@\s.]+)*")
_TRAILER = re.compile(r"^[A-Za-z][A-Za-z0-9-]*: ")
SIGNED_OFF = "Signed-off-by: "
CO_AUTHORED = "Co-authored-by: "


def parse_identity(text: str) -> Identity | None:
    """``Name <email>`` as an Identity, or None if it is not one."""
    match = _IDENTITY.fullmatch(text.strip())
    if not match or not _EMAIL.fullmatch(match["email"]):
        return None
    name = match["name"].strip()
    if not name or not all(char.isprintable() for char in name + match["email"]):
        return None
    return Identity(name, match["email"])


def placeholder_reason(identity: Identity) -> str | None:
    """Why ``identity`` names no person who can sign off, or None."""
    for known in PROJECT_IDENTITIES:
        if identity.email.lower() == known.email.lower() or identity.name == known.name:
            return "this project's placeholder identity"
    domain = identity.email.rsplit("@", 1)[1].lower().rstrip(".")
    if _ip_literal(domain):
        return (
            f"an address at an IP literal ({domain}), a machine rather than a "
            f"mail domain, which names no one"
        )
    reserved = domain.rsplit(".", 1)[-1] in RESERVED_DOMAINS or any(
        domain == name or domain.endswith(f".{name}") for name in RESERVED_NAMES
    )
    if reserved:
        return f"an address at a reserved domain ({domain}), which no mail reaches"
    if "." not in domain:
        return f"an address at {domain}, a domain without a dot, which no mail reaches"
    return None


def _ip_literal(domain: str) -> bool:
    """Whether the part after @ is an address literal (RFC 5321: [1.2.3.4],
    [IPv6:...], any [...]) or a bare IPv4 or IPv6 address."""
    if domain.startswith("[") or domain.endswith("]"):
        return True
    try:
        ipaddress.ip_address(domain)
    except ValueError:
        return False
    return True


def configured_identity() -> tuple[str, str]:
    """git's user.name and user.email where export runs ("" when unset)."""
    values = []
    for key in ("user.name", "user.email"):
        result = processes.run(["git", "config", "--get", key])
        values.append(result.stdout.strip() if result.returncode == 0 else "")
    return values[0], values[1]


def resolve_submitter(option: str | None) -> Identity:
    """The submitter from ``--as``, else from git's configuration; refused with
    a one-line SubmitterError when there is none or it is not a person."""
    fix = "pass --as 'NAME <EMAIL>' with your own name and address"
    if option is not None:
        origin, text = "--as", option
    else:
        name, email = configured_identity()
        if not name or not email:
            raise SubmitterError(
                "no submitter identity: git's user.name and user.email are not "
                f"both set; {fix} (vLLM's DCO check needs the author's sign-off)"
            )
        origin, text = "git's user.name and user.email", f"{name} <{email}>"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        char = text[exc.start]
        byte = ord(char) - 0xDC00 if "\udc80" <= char <= "\udcff" else None
        shown = f"byte 0x{byte:02x}" if byte is not None else "a character"
        raise SubmitterError(
            f"{origin} is not UTF-8 text ({shown} at position {exc.start + 1}); "
            f"git writes the identity into every mail; {fix}"
        ) from None
    identity = parse_identity(text)
    if identity is None:
        raise SubmitterError(f"{origin} gives {text!r}, which is not 'Name <email>'")
    reason = placeholder_reason(identity)
    if reason:
        raise SubmitterError(
            f"{origin} gives {identity}, {reason}, not a person who can sign "
            f"the patches off; {fix}"
        )
    return identity


def signed_message(message: str, author: Identity | None, submitter: Identity) -> str:
    """The commit message as the submitter sends it: placeholder sign-offs
    dropped, a person who wrote the patch credited, the submitter's
    `Signed-off-by:` last."""
    body, trailers = _split_trailers(message.rstrip("\n").split("\n"))
    own = f"{SIGNED_OFF}{submitter}"
    kept = [
        line for line in trailers if line != own and not _placeholder_sign_off(line)
    ]
    if author and author != submitter and placeholder_reason(author) is None:
        credit = f"{CO_AUTHORED}{author}"
        if credit not in kept:
            first_sign_off = next(
                (i for i, line in enumerate(kept) if line.startswith(SIGNED_OFF)),
                len(kept),
            )
            kept.insert(first_sign_off, credit)
    lines = [*body, "", *kept, own] if body else [*kept, own]
    return "\n".join(lines) + "\n"


def _split_trailers(lines: list[str]) -> tuple[list[str], list[str]]:
    """The message's lines before its trailer block, and the block (the last
    paragraph, if every line of it is a trailer)."""
    blank = max((i for i, line in enumerate(lines) if not line.strip()), default=-1)
    last = lines[blank + 1 :]
    if last and all(_TRAILER.match(line) for line in last):
        return lines[:blank], last
    return lines, []


def _placeholder_sign_off(line: str) -> bool:
    if not line.startswith(SIGNED_OFF):
        return False
    identity = parse_identity(line.removeprefix(SIGNED_OFF))
    return identity is not None and placeholder_reason(identity) is not None
