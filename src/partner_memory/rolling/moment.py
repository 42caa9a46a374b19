"""What one rolling covers, shared by live rollings and a replay's planned ones."""

from __future__ import annotations

from typing import NamedTuple

from partner_memory.model import Message


class Moment(NamedTuple):
    """What a rolling covers, fixed when its lease is taken."""

    snapshot: tuple[Message, ...]
    last_interaction: int | None
    #: The slice's time (ms).
    at: int
    idle: bool
    #: Each message's interaction time, as the window has them.
    interactions: tuple[int | None, ...] = ()
    #: A quiet gap ends the snapshot: it is a memory session that has ended, and the
    #: window holds the next one's messages after it.
    ended: bool = False
