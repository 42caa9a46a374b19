"""R24: resolved blocks as XML elements named after the block, with source and urgency."""

from __future__ import annotations

import re
from collections.abc import Sequence
from xml.sax.saxutils import escape, quoteattr

from partner_memory.context.workspace import ResolvedBlock

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
