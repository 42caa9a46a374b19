"""What recall returns: the messages it found, where they are, and the slices that hold them."""

from __future__ import annotations

from dataclasses import dataclass

from partner_memory.model import MemorySlice, Message, Record


@dataclass(frozen=True, slots=True)
class RecalledMessage(Record):
    """A message recall found, best first; `unit_id` None: still in the window (not rolled)."""

    message: Message
    unit_id: str | None
    position: int | None
    score: float


@dataclass(frozen=True, slots=True)
class RecalledSlice(Record):
    """A slice whose range holds a recalled message: its summary, and where to read more."""

    unit_id: str
    slice: MemorySlice


@dataclass(frozen=True, slots=True)
class RecallResult(Record):
    query: str
    hits: list[RecalledMessage]
    slices: list[RecalledSlice]
