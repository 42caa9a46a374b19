"""R11: the text convention of trajectory messages - a marker line, a blank line, the body.

[USER: Mei]:                       [[AGENT]: self]: [NOT_REPLIED]:

I'm planning a trip to Kyoto.      (what the model said, not shown to the user)
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

AGENT_MARKER = "[[AGENT]: self]"
UNKNOWN_MARKER = "[[Unknown]: Unknown]"
NOT_REPLIED = "NOT_REPLIED"
COMPRESSED = "COMPRESSED"
NO_REPLY = "NO_REPLY"
_STRUCTURED_PREFIXES = ("<input>", "<context>", "<?xml")


def compose(marker: str, body: str) -> str:
    """Marker line, then a blank line and the body; an empty body leaves `marker:` alone."""
    return f"{marker}:\n\n{body}" if body else f"{marker}:"


def split(content: str) -> tuple[str | None, str]:
    """(marker, body) of a message; marker is None for text without the convention."""
    head, sep, body = content.partition("\n\n")
    if head.startswith("[") and head.endswith(":") and "\n" not in head:
        return head[:-1], body
    if not sep and content.startswith("[") and content.endswith(":") and "\n" not in content:
        return content[:-1], ""
    return None, content


#: Status markers at the end of a marker line: `: [NOT_REPLIED]`, `: [COMPRESSED]`.
_STATUS_TAIL = re.compile(r"^(.*?)((?:: \[[A-Z][A-Z_]*\])*)$", re.DOTALL)
_STATUS = re.compile(r"\[([A-Z][A-Z_]*)\]")


class Parsed(NamedTuple):
    """A message's text split by the convention: identity marker, status markers, body."""

    identity: str | None
    statuses: tuple[str, ...]
    body: str


def parse(content: str) -> Parsed:
    """`[[AGENT]: self]: [NOT_REPLIED]:\n\nhi` -> ("[[AGENT]: self]", ("NOT_REPLIED",), "hi")."""
    marker, body = split(content)
    if marker is None:
        return Parsed(None, (), content)
    identity, statuses = _marker_parts(marker)
    return Parsed(identity, statuses, body)


@lru_cache(maxsize=4096)
def _marker_parts(marker: str) -> tuple[str, tuple[str, ...]]:
    """A marker line's identity and status markers; a conversation has few marker lines,
    and each message is parsed several times on its way to memory."""
    found = _STATUS_TAIL.match(marker)
    assert found is not None  # the pattern matches any text
    return found.group(1) or marker, tuple(_STATUS.findall(found.group(2)))


def speaker(identity: str) -> str:
    """The name an identity marker gives: the agent is AGENT, a source its name."""
    return "AGENT" if identity == AGENT_MARKER else source_name(identity)


def source_name(marker: str) -> str:
    """The name a source marker gives: `[USER: Mei]` -> Mei, `[Caroline]` -> Caroline."""
    name = marker.split("]", maxsplit=1)[0].lstrip("[")
    return name.split(":", 1)[-1].strip() or name


def with_status(marker: str | None, status: str) -> str:
    """Status markers follow the identity marker: `[[AGENT]: self]: [COMPRESSED]`."""
    base = marker or UNKNOWN_MARKER
    return f"{base}: [{status}]"


def user_text(source: str, body: str) -> str:
    return compose(f"[{source}]", body)


def assistant_text(output: str) -> tuple[str, bool]:
    """The assistant's message text and whether it was shown to the user (NO_REPLY is not)."""
    if output == NO_REPLY or output.startswith(NO_REPLY + "\n"):
        hidden = output[len(NO_REPLY) :].lstrip("\n")
        return compose(with_status(AGENT_MARKER, NOT_REPLIED), hidden), False
    return compose(AGENT_MARKER, output), True


def is_structured_prompt(role: str, content: str) -> bool:
    """R10: user messages that carry a structured prompt, not conversation."""
    return role == "user" and content.strip().startswith(_STRUCTURED_PREFIXES)
