"""Rows as every backend keeps and dumps them: a unit, slice or message to and from the
columns the SQL tables (and `NamespaceDump`) hold."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from partner_memory.model import (
    MemorySlice,
    Message,
    RollingCost,
    UnitInfo,
    dump_metadata,
    load_metadata,
)

#: A rolling's cost as the log keeps it (after its other columns).
COST_COLUMNS = (
    "summarizer, llm_calls, prompt_tokens, completion_tokens, llm_ms, pipeline_ms, fallbacks"
)


def unit_from_row(row: Sequence[Any]) -> UnitInfo:
    return UnitInfo(id=row[0], timestamp=row[1], message_count=row[2], slice_count=row[3])


def slice_from_row(row: Sequence[Any]) -> MemorySlice:
    return MemorySlice(
        id=row[0],
        start_index=row[1],
        end_index=row[2],
        summary=row[3],
        timestamp=row[4],
        summarizer=row[5],
    )


def cost_from_row(row: Sequence[Any]) -> RollingCost:
    """A rolling's cost from `COST_COLUMNS` (its fallback reasons one a line)."""
    return RollingCost(
        summarizer=row[0],
        llm_calls=int(row[1]),
        prompt_tokens=int(row[2]),
        completion_tokens=int(row[3]),
        llm_ms=float(row[4]),
        pipeline_ms=float(row[5]),
        fallbacks=tuple(str(row[6]).splitlines()),
    )


def cost_params(cost: RollingCost) -> tuple[Any, ...]:
    """A rolling's cost as the values of `COST_COLUMNS`."""
    return (
        cost.summarizer,
        cost.llm_calls,
        cost.prompt_tokens,
        cost.completion_tokens,
        cost.llm_ms,
        cost.pipeline_ms,
        "\n".join(cost.fallbacks),
    )


def message_from_row(row: Sequence[Any]) -> Message:
    """A message from columns that came from outside a store (a dump): checked."""
    return Message(
        id=row[0], role=row[1], content=row[2], timestamp=row[3], metadata=load_metadata(row[4])
    )


def stored_message(row: Sequence[Any]) -> Message:
    """A message from a store's own row: checked when it was written."""
    return Message.stored(row[0], row[1], row[2], row[3], load_metadata(row[4]))


def message_params(message: Message) -> tuple[Any, ...]:
    """A message as the values of MESSAGE_COLUMNS (id, role, content, timestamp, metadata:
    JSON text, None when empty)."""
    metadata = dump_metadata(message.metadata) if message.metadata else None
    return (message.id, message.role, message.content, message.timestamp, metadata)


def first_generation() -> int:
    """A new namespace's recall generation: random, so an index built for a namespace of
    the same name that was forgotten (or a database replaced) is never taken for its."""
    return secrets.randbits(52) + 1
