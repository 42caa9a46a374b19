"""The context workspace (R21-R24): blocks of context that fade, compete and render as XML."""

from partner_memory.context.block import (
    DEFAULT_DOMAINS,
    ContextBlock,
    Domain,
    Exposure,
    Level,
    Urgency,
)
from partner_memory.context.render import render_xml
from partner_memory.context.workspace import ContextWorkspace, ResolvedBlock, TraceEvent

__all__ = [
    "DEFAULT_DOMAINS",
    "ContextBlock",
    "ContextWorkspace",
    "Domain",
    "Exposure",
    "Level",
    "ResolvedBlock",
    "TraceEvent",
    "Urgency",
    "render_xml",
]
