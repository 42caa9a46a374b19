"""Following the rolling log: data in from the store, data out to it.

The store offers a consumer's position (`consumer_position`), the log
(`read_log`) and one conditional write (`advance_consumer`: these staged rows
and this new position, if the position and the namespace's generation are
still the expected ones, else `ConflictError`). Everything else of following
is here, once for every backend: batching, `prepare` (slow work - an LLM, an
embeddings endpoint - done before anything is written, holding no lock), the
rollings read ahead for the next round, and the rollings this process just
committed, taken unread. The consumer's `apply` runs outside any transaction;
a round that loses a race (another process moved the consumer on, a forget
changed the rollings) reads again and applies nothing twice.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections import deque
from collections.abc import Callable, Sequence

from partner_memory.errors import ConflictError
from partner_memory.model import LogEntry
from partner_memory.store.contract.base import CommittedRolling, FollowerPosition, MemoryStore
from partner_memory.store.contract.staged import Staged

#: Consumers and namespaces whose rollings read ahead are kept (each at most a lookahead).
LOOKED_AHEAD_KEPT = 16
#: Characters of messages of just-committed rollings kept (~8 MB of text).
KEPT_CHARS = 1 << 23
#: Rounds lost to other processes before a follow gives up (and is retried later).
MAX_RACES = 20

Apply = Callable[[LogEntry], Sequence[Staged]]
#: Each store's follower in this process.
_FOLLOWERS: weakref.WeakKeyDictionary[MemoryStore, LogFollower] = weakref.WeakKeyDictionary()
_FOLLOWERS_LOCK = threading.Lock()
Prepare = Callable[[Sequence[LogEntry]], None]


class LogFollower:
    """The rounds of this process's durable consumers over one store, with what they
    keep between rounds: the rollings read ahead, and those this process committed.
    Rounds of one consumer on one namespace take turns in this process (`of` gives the
    store's one follower), so a race - and an `apply` repeated for a rolling whose write
    lost it - only happens between processes."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._ahead = ReadAhead()
        self._committed = _JustCommitted()
        self._turns: dict[tuple[str, str], threading.Lock] = {}
        self._lock = threading.Lock()

    @classmethod
    def of(cls, store: MemoryStore) -> LogFollower:
        """The store's follower in this process (every service over it shares it)."""
        with _FOLLOWERS_LOCK:
            found = _FOLLOWERS.get(store)
            if found is None:
                found = _FOLLOWERS[store] = cls(store)
            return found

    def _turn(self, consumer: str, namespace: str) -> threading.Lock:
        with self._lock:
            return self._turns.setdefault((consumer, namespace), threading.Lock())

    def committed(self, namespace: str, done: Sequence[CommittedRolling]) -> None:
        """Rollings this process just committed (in one transaction, log order): a round
        takes those whose entries the backend gave from here, unread."""
        self._committed.add(namespace, done)

    def round(
        self,
        consumer: str,
        namespace: str,
        apply: Apply,
        *,
        batch: int = 1,
        prepare: Prepare | None = None,
        lookahead: int | None = None,
    ) -> LogEntry | None:
        """Apply the consumer's next rollings (up to `batch`, in order) and move it past
        them in one write; the last one applied, or None when it is caught up. If `apply`
        raises, nothing of the batch is written. `prepare` first sees up to `lookahead`
        rollings (`batch` if not given)."""
        with self._turn(consumer, namespace):
            prepared = prepare is None
            wanted = max(1, batch, (lookahead or 0) if prepare is not None else 0)
            for _ in range(MAX_RACES):
                at = self._store.consumer_position(consumer, namespace)
                ahead = self._next(consumer, namespace, at, wanted)
                if not ahead:
                    return None
                if prepare is not None and not prepared:
                    prepare(ahead)
                    prepared = True
                    if self._store.consumer_position(consumer, namespace) != at:
                        continue  # moved on, or a forget changed them, while preparing: read again
                entries, rest = ahead[: max(1, batch)], ahead[max(1, batch) :]
                staged = [(entry, apply(entry)) for entry in entries]
                try:
                    self._store.advance_consumer(consumer, namespace, at, staged)
                except ConflictError:
                    continue  # moved on elsewhere, or changed by a forget: read again
                if rest:
                    self._ahead.keep((consumer, namespace), at.generation, rest)
                return entries[-1]
            raise ConflictError(f"consumer {consumer!r} on {namespace!r} kept losing races")

    def _next(
        self, consumer: str, namespace: str, at: FollowerPosition, wanted: int
    ) -> list[LogEntry]:
        """The rollings after `at`: read ahead last round, committed here, else read."""
        ahead = self._ahead.take((consumer, namespace), at)[:wanted]
        if len(ahead) < wanted:
            after = ahead[-1].seq if ahead else at.position
            ahead += self._committed.after(namespace, at.generation, after, wanted - len(ahead))
        if len(ahead) < wanted:
            after = ahead[-1].seq if ahead else at.position
            ahead += self._store.read_log(namespace, after, limit=wanted - len(ahead))
        return ahead


class ReadAhead:
    """Per consumer and namespace, the rollings a round read beyond what it applied, and
    the generation they were read in; the oldest are dropped past `LOOKED_AHEAD_KEPT`."""

    def __init__(self) -> None:
        self._kept: dict[tuple[str, str], tuple[int, list[LogEntry]]] = {}
        self._lock = threading.Lock()

    def take(self, key: tuple[str, str], at: FollowerPosition) -> list[LogEntry]:
        """Those after `at.position`, if read in its generation (a forget since: none)."""
        with self._lock:
            kept = self._kept.pop(key, None)
        if kept is None or kept[0] != at.generation:
            return []
        return [entry for entry in kept[1] if entry.seq > at.position]

    def keep(self, key: tuple[str, str], generation: int, entries: list[LogEntry]) -> None:
        with self._lock:
            self._kept[key] = (generation, entries)
            while len(self._kept) > LOOKED_AHEAD_KEPT:
                del self._kept[next(iter(self._kept))]


class _JustCommitted:
    """Per namespace, the latest run of consecutive rollings this process committed, in
    the generation they were committed in; bounded in characters, oldest dropped first."""

    def __init__(self) -> None:
        self._runs: dict[str, _Run] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def add(self, namespace: str, done: Sequence[CommittedRolling]) -> None:
        """A rolling whose entry the backend could not give ends the run."""
        stored = [d for d in done if d.seq is not None]
        if not stored:
            return
        with self._lock:
            run = self._runs.pop(namespace, None)
            first = stored[0]
            if run is None or not run.followed_by(first):
                if run is not None:
                    self._chars -= run.chars
                run = _Run(first.generation)
            for rolling in stored:
                if rolling.logged is None or rolling.generation != run.generation:
                    self._chars -= run.chars
                    run = _Run(rolling.generation)
                if rolling.logged is not None:
                    self._chars += run.append(rolling.logged)
            if run.entries:
                self._runs[namespace] = run
                self._trim()

    def after(self, namespace: str, generation: int, seq: int, limit: int) -> list[LogEntry]:
        """The kept rollings from `seq + 1` on (at most `limit`), if the run holds
        `seq + 1` and was committed in `generation`."""
        with self._lock:
            run = self._runs.get(namespace)
            if run is None or run.generation != generation:
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

    def __init__(self, generation: int | None) -> None:
        self.generation = generation
        self.entries: deque[LogEntry] = deque()
        self.chars = 0

    def followed_by(self, rolling: CommittedRolling) -> bool:
        """Whether `rolling` comes next, in the same generation."""
        return (
            rolling.generation == self.generation
            and bool(self.entries)
            and rolling.logged is not None
            and self.entries[-1].seq + 1 == rolling.logged.seq
        )

    def append(self, entry: LogEntry) -> int:
        chars = _chars(entry)
        self.entries.append(entry)
        self.chars += chars
        return chars

    def drop_first(self) -> int:
        chars = _chars(self.entries.popleft())
        self.chars -= chars
        return chars


def _chars(entry: LogEntry) -> int:
    return sum(len(m.content) for m in entry.messages)
