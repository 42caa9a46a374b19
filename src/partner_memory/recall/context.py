"""What recall leaves in the agent's context: the `activated_memory_slices` block.

Like the reference's retrieval layer: the slices a search found, dated, each
with the found messages quoted, so the agent's next prompt holds what was
recalled. It fades as the `dialog_history` blocks do, and the next search
replaces it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from partner_memory import markers
from partner_memory.context import ContextBlock, Domain
from partner_memory.context.block import INITIAL_SCORE
from partner_memory.recall.results import RecalledMessage, RecallResult
from partner_memory.rolling.settings import RollingSettings

ACTIVATED_MEMORY_SLICES = "activated_memory_slices"
RECALL_SOURCE = "recall"
#: Characters of a quoted message, and quoted messages per slice.
EXCERPT_CHARS, EXCERPTS = 240, 3


def _when(ms: int | None) -> str:
    if ms is None:
        return "undated"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def _quote(hit: RecalledMessage) -> str:
    marker, body = markers.split(hit.message.content)
    text = " ".join(body.split())
    if len(text) > EXCERPT_CHARS:
        text = text[: EXCERPT_CHARS - 1].rstrip() + "…"
    return f"> {marker + ': ' if marker else ''}{text}"


def activated_block(found: RecallResult, settings: RollingSettings) -> ContextBlock | None:
    """The block for `found`, or None when it found nothing."""
    if not found.hits:
        return None
    parts, summaries = [], []
    for held in found.slices:
        inside = [
            h
            for h in found.hits
            if h.unit_id == held.unit_id
            and h.position is not None
            and held.slice.start_index <= h.position < held.slice.end_index
        ]
        head = f"[{_when(held.slice.timestamp)}] {held.slice.summary}"
        summaries.append(head)
        quotes = [_quote(h) for h in inside[:EXCERPTS]]
        parts.append("\n".join([head, *quotes, f"(unit {held.unit_id}, slice {held.slice.id})"]))
    recent = [h for h in found.hits if h.unit_id is None]
    if recent:
        parts.append("\n".join(["[not yet summarised]", *(_quote(h) for h in recent[:EXCERPTS])]))
    title = f"recalled for {found.query!r}:"
    return recall_block(
        "\n\n".join([title, *parts]),
        "\n".join([title, *summaries]) if summaries else None,
        f"{title} {summaries[0]}" if summaries else None,
        settings,
    )


def recall_block(
    full: str,
    compact: str | None,
    abstract: str | None,
    settings: RollingSettings,
    *,
    score: float = INITIAL_SCORE,
    made_at: int = 0,
) -> ContextBlock:
    """The `activated_memory_slices` block of these renderings."""
    return ContextBlock(
        name=ACTIVATED_MEMORY_SLICES,
        source=RECALL_SOURCE,
        full=full,
        compact=compact,
        abstract=abstract,
        domains=frozenset({Domain.MEMORY}),
        replace_fade=settings.replace_fade,
        time_fade_per_minute=settings.time_fade_per_minute,
        activate=settings.activate,
        score=score,
        made_at=made_at,
    )
