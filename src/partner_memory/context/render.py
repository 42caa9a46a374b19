"""R24: resolved blocks as XML elements named after the block, with source and urgency;
with the window's newest messages for a client that keeps no transcript (MCP)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from xml.sax.saxutils import escape, quoteattr

from partner_memory import markers as r11
from partner_memory.clip import clipped
from partner_memory.context.workspace import ResolvedBlock
from partner_memory.model import WindowMessage

_NOT_NAME = re.compile(r"[^A-Za-z0-9_.-]")


def _tag(name: str) -> str:
    tag = _NOT_NAME.sub("_", name)
    return tag if tag and (tag[0].isalpha() or tag[0] == "_") else f"_{tag}"


def render_block(block: ResolvedBlock) -> str:
    tag = _tag(block.name)
    attrs = f"source={quoteattr(block.source)} urgency={quoteattr(block.urgency.value)}"
    if not block.history:
        return f"<{tag} {attrs}>{escape(block.snapshot)}</{tag}>"
    parts = [f"<snapshot>{escape(block.snapshot)}</snapshot>"]
    parts += [f"<history_snapshot>{escape(text)}</history_snapshot>" for text in block.history]
    inner = "\n".join(f"  {p}" for p in parts)
    return f"<{tag} {attrs}>\n{inner}\n</{tag}>"


def render_xml(blocks: Sequence[ResolvedBlock]) -> str:
    """The resolved context as the XML text placed in an agent's prompt."""
    return "\n".join(render_block(b) for b in blocks)


#: The newest window messages a context for a client without a transcript of its own
#: carries (MCP), each cut to `RECENT_CHARS`: what was said since the last summary.
RECENT_MESSAGES, RECENT_CHARS = 20, 1000
NOTHING_STORED = "<memory_status>Nothing is stored in this memory yet.</memory_status>"
NOTHING_SUMMARISED = (
    "<memory_status>Nothing is summarised yet: the conversation so far is below.</memory_status>"
)


def render_with_window(blocks: Sequence[ResolvedBlock], window: Sequence[WindowMessage]) -> str:
    """The context as XML followed by the window's newest messages (`RECENT_MESSAGES`),
    for a client that keeps no transcript of its own; before anything is stored, or
    summarised, it says so instead of answering with nothing."""
    if not blocks and not window:
        return NOTHING_STORED
    parts = [render_xml(blocks) if blocks else NOTHING_SUMMARISED]
    if window:
        recent = window[-RECENT_MESSAGES:]
        left = len(window) - len(recent)
        attrs = f' earlier="{left}"' if left else ""
        lines = [_message(m) for m in recent]
        parts.append(f"<recent_messages{attrs}>\n" + "\n".join(lines) + "\n</recent_messages>")
    return "\n".join(parts)


def _message(said: WindowMessage) -> str:
    message = said.message
    parsed = r11.parse(message.content)  # the body, its speaker beside it
    attrs = f"role={quoteattr(message.role)}"
    speaker = message.speaker_named(parsed.identity)
    if speaker is not None:
        attrs += f" speaker={quoteattr(speaker)}"
    if message.timestamp is not None:
        at = datetime.fromtimestamp(message.timestamp / 1000, tz=UTC)
        attrs += f" at={quoteattr(at.strftime('%Y-%m-%dT%H:%M:%SZ'))}"
    return f"  <message {attrs}>{escape(clipped(parsed.body, RECENT_CHARS))}</message>"
