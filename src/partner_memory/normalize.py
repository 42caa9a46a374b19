"""R6: the normalisation every slice goes through on update and on load.

Slices arrive from outside (the reference's files, callers) with missing ids,
zero timestamps or ranges past the end of the unit; this turns them into
slices that always index safely into their unit's messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from partner_memory.model import MemorySlice, new_id


@dataclass(frozen=True, slots=True)
class RawSlice:
    """A slice as found outside the store: any field may be missing or out of range."""

    summary: str
    id: str | None = None
    start_index: int | None = None
    end_index: int | None = None
    timestamp: int | None = None


def normalize_unit_timestamp(timestamp: int | None, now: int) -> int:
    """A unit without a positive timestamp is stamped with the current time."""
    return timestamp if timestamp is not None and timestamp > 0 else now


def normalize_slice(
    raw: RawSlice,
    message_count: int,
    unit_timestamp: int,
    make_id: Callable[[], str] = new_id,
) -> MemorySlice:
    start = raw.start_index if raw.start_index is not None and raw.start_index > 0 else 0
    start = min(start, message_count)
    end = raw.end_index
    end = message_count if end is None or end < start else min(end, message_count)
    timestamp = raw.timestamp if raw.timestamp is not None and raw.timestamp > 0 else unit_timestamp
    return MemorySlice(
        id=raw.id or make_id(),
        start_index=start,
        end_index=end,
        summary=raw.summary,
        timestamp=timestamp,
    )


def normalize_slices(
    raws: Iterable[RawSlice | None],
    message_count: int,
    unit_timestamp: int,
    make_id: Callable[[], str] = new_id,
) -> list[MemorySlice]:
    """Apply R6 to a unit's slices: drop nulls, fill ids and times, clamp, sort by time."""
    slices = [
        normalize_slice(raw, message_count, unit_timestamp, make_id)
        for raw in raws
        if raw is not None
    ]
    slices.sort(key=lambda s: s.timestamp)  # list.sort is stable, as R6 requires
    return slices
