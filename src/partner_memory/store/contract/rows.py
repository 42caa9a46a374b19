"""Rows as every backend keeps and dumps them: a unit, slice or message to and from the
columns the SQL tables (and `NamespaceDump`) hold."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from partner_memory.model import MemorySlice, Message, UnitInfo, dump_metadata, load_metadata


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
