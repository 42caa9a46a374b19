"""A committed rolling's log entry as `read_log` will give it, made from what was
written, so this process's followers take it unread (`rolling.follow`).

In the process that committed a rolling, its log row, slice and messages are
the values just written: the recall index of an ingest read back each
conversation it had replayed, a sixth of its time after the replay. An entry
is made only when reading it back is certain to give the same values: its
messages' metadata must be flat JSON values (a tuple, say, would come back a
list).
"""

from __future__ import annotations

from partner_memory.model import LogEntry, Message, UnitUpdate
from partner_memory.store.contract.base import RollingCommit
from partner_memory.store.contract.rows import cost_from_row, cost_params

#: Metadata values that come back from the store as the same type and value.
_FLAT = frozenset({str, int, float, bool, type(None)})


def logged_entry(
    namespace: str, seq: int, update: UnitUpdate, commit: RollingCommit
) -> LogEntry | None:
    """The entry `read_log` gives for this committed rolling; None when its messages
    might read back otherwise than they were given."""
    messages = []
    for m in commit.messages:
        if not all(map(_FLAT.__contains__, map(type, m.metadata.values()))):
            return None
        # a copy: the caller's metadata dict is the caller's to change
        messages.append(Message.stored(m.id, m.role, m.content, m.timestamp, dict(m.metadata)))
    return LogEntry(
        namespace=namespace,
        seq=seq,
        unit=update.unit,
        slice=update.slice,
        messages=tuple(messages),
        idle=commit.idle,
        rolling_size=commit.rolling_size,
        retain_divisor=commit.retain_divisor,
        cost=cost_from_row(cost_params(commit.cost)),  # as the row reads back
    )
