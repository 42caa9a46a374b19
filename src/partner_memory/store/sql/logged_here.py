"""The rollings this process just committed, for its own consumers to take unread.

A durable consumer follows the rolling log by reading it back: the rolling's
log row, its slice and every message of it. In the process that committed
the rolling, those are the values it has just written: the recall index of
an ingest read back each conversation it had replayed, a sixth of its time
after the replay. So a store keeps, per namespace, the entries of the
rollings it committed last, exactly as `read_log` would return them, and
`follow_log` takes them from here; anything else (another process's
rollings, a gap, a forget or reindex since) is read from the log as before.

An entry is kept only when reading it back is certain to give the same
values: its messages' metadata must be flat JSON values (a tuple, say,
would come back a list). What is kept is bounded in characters, oldest
dropped first.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Sequence

from partner_memory.model import LogEntry, Message, UnitUpdate
from partner_memory.store.contract.base import RollingCommit

#: Characters of messages kept in all (~8 MB of text): a few conversations' rollings.
KEPT_CHARS = 1 << 23
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
    )


def _chars(entry: LogEntry) -> int:
    return sum(len(m.content) for m in entry.messages)


class LoggedHere:
    """Per namespace: its id and recall generation when committed, and the latest run of
    consecutive rollings this process committed there."""

    def __init__(self) -> None:
        self._runs: dict[str, _Run] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def add(
        self,
        namespace: str,
        namespace_id: int,
        generation: int,
        entries: Sequence[LogEntry | None],
    ) -> None:
        """Rollings committed in one transaction, in log order. A rolling that cannot be
        kept ends the run: the log is read from it on."""
        with self._lock:
            run = self._runs.pop(namespace, None)
            first = entries[0] if entries else None
            if run is None or not run.followed_by(namespace_id, generation, first):
                if run is not None:
                    self._chars -= run.chars
                run = _Run(namespace_id, generation)
            for entry in entries:
                if entry is None:
                    self._chars -= run.chars
                    run = _Run(namespace_id, generation)
                else:
                    self._chars += run.append(entry)
            if run.entries:
                self._runs[namespace] = run
                self._trim()

    def after(
        self, namespace: str, namespace_id: int, generation: int, seq: int, limit: int
    ) -> list[LogEntry]:
        """The kept rollings from `seq + 1` on (at most `limit`), if the run holds
        `seq + 1` and the namespace and its generation are those it was committed in."""
        with self._lock:
            run = self._runs.get(namespace)
            if run is None or (run.namespace_id, run.generation) != (namespace_id, generation):
                return []
            start = seq + 1 - run.entries[0].seq
            if start < 0:
                return []
            return list(itertools.islice(run.entries, start, start + limit))

    def _trim(self) -> None:
        """Drop the oldest rollings, namespace by namespace, past `KEPT_CHARS` (lock held)."""
        while self._chars > KEPT_CHARS and self._runs:
            oldest = next(iter(self._runs))
            run = self._runs[oldest]
            self._chars -= run.drop_first()
            if not run.entries:
                del self._runs[oldest]


class _Run:
    """Consecutive rollings of one namespace, and their characters."""

    def __init__(self, namespace_id: int, generation: int) -> None:
        self.namespace_id = namespace_id
        self.generation = generation
        self.entries: deque[LogEntry] = deque()
        self.chars = 0

    def followed_by(self, namespace_id: int, generation: int, entry: LogEntry | None) -> bool:
        """Whether `entry`, committed in that namespace and generation, comes next."""
        return (
            (self.namespace_id, self.generation) == (namespace_id, generation)
            and bool(self.entries)
            and entry is not None
            and self.entries[-1].seq + 1 == entry.seq
        )

    def append(self, entry: LogEntry) -> int:
        """Keep `entry`; its characters."""
        chars = _chars(entry)
        self.entries.append(entry)
        self.chars += chars
        return chars

    def drop_first(self) -> int:
        """Forget the oldest rolling; its characters."""
        chars = _chars(self.entries.popleft())
        self.chars -= chars
        return chars
