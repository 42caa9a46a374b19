"""R11: the text convention of trajectory messages - a marker line, a blank line, the body.

[USER: Mei]:                       [[AGENT]: self]: [NOT_REPLIED]:

I'm planning a trip to Kyoto.      (what the model said, not shown to the user)
"""

from __future__ import annotations

from partner_memory.model import Message

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


def is_structured_prompt(message: Message) -> bool:
    """R10: user messages that carry a structured prompt, not conversation."""
    return message.role == "user" and message.content.strip().startswith(_STRUCTURED_PREFIXES)
