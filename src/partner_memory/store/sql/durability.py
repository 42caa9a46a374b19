"""Which writes wait for the disk: those a caller waits for, not the work behind them.

A turn, an import, a forget or an explicit rolling is acknowledged to its
caller, so its commit waits for the disk (SQLite `synchronous=FULL`, an
fsync; PostgreSQL's WAL flush). What runs behind the caller - a rolling the
count or idle trigger started, its lease, the AfterRolling consumers and the
recall index they write - is acknowledged to nobody, and everything it
writes is either redone (a lease, a rolling: its messages are still in the
window) or rebuilt (derived rows) if it is lost. Its transactions commit
without waiting for the disk: SQLite's WAL keeps them in order, so the next
acknowledged commit's fsync (or a checkpoint) makes them durable too, and a
power loss can only undo the newest of them, never leave one half there or
keep a later one without an earlier. A process crash loses none of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_BEHIND = ContextVar("partner_memory_behind_the_caller", default=False)


@contextmanager
def behind_the_caller() -> Iterator[None]:
    """Writes in this block (and in work it hands to other threads with its context)
    are acknowledged to nobody: their commits need not wait for the disk."""
    token = _BEHIND.set(True)
    try:
        yield
    finally:
        _BEHIND.reset(token)


def awaited() -> bool:
    """Whether a write made now is acknowledged to a caller (its commit waits for the disk)."""
    return not _BEHIND.get()
