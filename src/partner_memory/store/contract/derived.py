"""Verbs of the core contract made from its others, for a backend to inherit.

A new backend writes the twenty verbs that hold state (`ESSENTIAL`) and
inherits the rest from `DerivedVerbs`: each verb here is exactly what its
protocol says, built from the essential ones. A backend with a cheaper way -
one query instead of a read of more than is asked - overrides it, as the SQL
backends do; `partner_memory.testing` holds either to the same behaviour.
The in-memory core (`store.memory.core.InMemoryCore`) writes only the twenty.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING

from partner_memory.errors import ConflictError, NotFoundError
from partner_memory.model import (
    LogEntry,
    MemorySlice,
    Message,
    NamespaceInfo,
    RollingCost,
    RollingTotals,
    UnitInfo,
    UnitUpdate,
    WindowActivity,
)
from partner_memory.store.contract.base import (
    BulkWrite,
    CommittedRolling,
    NewSlice,
    ReplayStep,
    RollingCommit,
    UnitQuery,
    UnitWrite,
)
from partner_memory.store.contract.capabilities import Capability
from partner_memory.store.contract.refusals import already_stored, refuse_repeated_ids

if TYPE_CHECKING:
    from partner_memory.store.contract.base import MemoryStore

#: More units (or rollings) than any namespace holds: "all of them".
_ALL = 2**62
#: Rollings read at a time where a verb walks the log.
_PAGE = 1000
#: How many of the latest fallback reasons the totals name.
RECENT_FALLBACKS = 5

#: The verbs a backend writes itself; every other core verb has a default here.
ESSENTIAL = (
    "ensure_namespace",
    "list_namespaces",
    "write_units",
    "list_units",
    "read_excerpts",
    "read_slices",
    "load_trajectory",
    "append_trajectory",
    "begin_rolling",
    "renew_leases",
    "rolling_holder",
    "context_state",
    "set_activation",
    "commit_replay",
    "read_log",
    "consumer_position",
    "advance_consumer",
    "record_consumer_failure",
    "consumer_status",
    "close",
)


def _glob_literal(name: str) -> str:
    """A glob (`fnmatchcase`) that matches `name` and nothing else."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


class DerivedVerbs:
    """Every core verb but `ESSENTIAL`, from those (and `url`). Each method's `self` is
    the whole store, so mypy checks a backend using these is one."""

    capabilities: frozenset[Capability] = frozenset()

    @property
    def read_only(self) -> bool:
        return False

    # -- units ---------------------------------------------------------------------------

    def get_namespace(self: MemoryStore, namespace: str) -> NamespaceInfo | None:
        found = self.list_namespaces(limit=1, matching=_glob_literal(namespace))
        return found[0] if found else None

    def set_session(self: MemoryStore, namespace: str, session_id: str) -> None:
        if self.get_namespace(namespace) is None:
            raise NotFoundError(f"namespace {namespace!r} not found")
        self.write_units(namespace, BulkWrite(session_id, []))

    def append(
        self: MemoryStore, namespace: str, messages: Sequence[Message], new: NewSlice
    ) -> UnitUpdate:
        ids = [m.id for m in messages]
        refuse_repeated_ids(ids, "update")
        while True:  # planned from what the store holds; planned again if a writer got there first
            info = self.get_namespace(namespace)
            if info is None:
                raise NotFoundError(f"namespace {namespace!r} not found")
            stored = self.find_messages(namespace, ids)
            if stored:
                raise already_stored(min(stored), namespace)
            session = info.memory_session_id
            unit = self.get_unit(namespace, session)
            count, slices = (0, 0) if unit is None else (unit.message_count, unit.slice_count)
            made = new.placed(count, count + len(ids))
            write = UnitWrite(session, new.timestamp, count, messages, [made])
            try:
                self.write_units(namespace, BulkWrite(session, [write]))
            except ConflictError:
                now = self.get_unit(namespace, session)
                if (0 if now is None else now.message_count) == count:
                    raise  # not another writer's append: refused for its own reason
                continue
            return UnitUpdate(UnitInfo(session, new.timestamp, count + len(ids), slices + 1), made)

    def get_unit(self: MemoryStore, namespace: str, unit_id: str) -> UnitInfo | None:
        try:
            units = self.list_units(namespace, UnitQuery(limit=_ALL))
        except NotFoundError:
            return None
        return next((u for u in units if u.id == unit_id), None)

    def read_messages(
        self: MemoryStore, namespace: str, unit_id: str, start: int, end: int
    ) -> list[Message]:
        return self.read_excerpts(namespace, [(unit_id, start, end)])[0][0]

    def find_messages(
        self: MemoryStore, namespace: str, message_ids: Sequence[str]
    ) -> dict[str, Message]:
        wanted = set(message_ids)
        units = self.list_units(namespace, UnitQuery(limit=_ALL, oldest_first=True))
        ranges = [(u.id, 0, u.message_count) for u in units]
        held = (m for said, _ in self.read_excerpts(namespace, ranges) for m in said)
        return {m.id: m for m in held if m.id in wanted}

    def get_slice(
        self: MemoryStore, namespace: str, unit_id: str, slice_id: str
    ) -> MemorySlice | None:
        return next((s for s in self.read_slices(namespace, unit_id) if s.id == slice_id), None)

    def stored_message_ids(
        self: MemoryStore, namespace: str, message_ids: Sequence[str]
    ) -> set[str]:
        return set(self.find_messages(namespace, message_ids))

    def count_units(
        self: MemoryStore, namespace: str, *, since: int | None = None, until: int | None = None
    ) -> int:
        if since is None and until is None:
            info = self.get_namespace(namespace)
            if info is None:
                raise NotFoundError(f"namespace {namespace!r} not found")
            return info.unit_count
        return len(self.list_units(namespace, UnitQuery(limit=_ALL, since=since, until=until)))

    def recent_slices(
        self: MemoryStore, namespace: str, limit: int
    ) -> list[tuple[str, MemorySlice]]:
        return self.context_state(namespace, slices=limit).slices

    def unit_ids(self: MemoryStore, namespace: str) -> list[str]:
        return [u.id for u in self.list_units(namespace, UnitQuery(limit=_ALL, oldest_first=True))]

    def unit_ids_starting(
        self: MemoryStore, namespace: str, prefix: str, *, limit: int
    ) -> list[str]:
        return sorted(u for u in self.unit_ids(namespace) if u.startswith(prefix))[:limit]

    def count_namespaces(self: MemoryStore, *, matching: str | None = None) -> int:
        return len(self.list_namespaces(matching=matching))

    # -- the window and the lease ----------------------------------------------------------

    def window_activity(self: MemoryStore, namespace: str) -> WindowActivity:
        return self.load_trajectory(namespace).activity

    def trajectory_length(self: MemoryStore, namespace: str) -> int:
        return self.window_activity(namespace).length

    def release_rolling(self: MemoryStore, namespace: str, holder: str) -> None:
        with suppress(ConflictError):  # a replay of nothing: the lease is released if held
            self.commit_replay(namespace, holder, [])

    def idle_candidates(self: MemoryStore, before: int, among: Sequence[str]) -> list[str]:
        found = []
        for name in among:
            try:
                activity = self.window_activity(name)
            except NotFoundError:  # forgotten meanwhile
                continue
            last = activity.last_interaction
            if last is not None and last < before and last != activity.idle_rolled_for:
                found.append(name)
        return found

    # -- the log -----------------------------------------------------------------------------

    def commit_rolling(
        self: MemoryStore, namespace: str, commit: RollingCommit
    ) -> CommittedRolling:
        step = ReplayStep((), None, rolling=commit)
        (done,) = self.commit_replay(namespace, commit.holder, [step])
        return done

    def log_head(self: MemoryStore, namespace: str) -> int:
        """The last rolling `read_log` gives: exact where no unit is ever deleted (a backend
        that forgets keeps the head itself, as the log skips a forgotten unit's rollings)."""
        if self.get_namespace(namespace) is None:
            return 0
        head = 0
        for entry in _whole_log(self, namespace):
            head = entry.seq
        return head

    def lagging_namespaces(self: MemoryStore, consumer: str, *, limit: int = 1000) -> list[str]:
        lagging = []
        for info in self.list_namespaces():
            at = {c.name: c.position for c in self.consumer_status(info.name)}.get(consumer, 0)
            if self.log_head(info.name) > at:
                lagging.append(info.name)
                if len(lagging) >= limit:
                    break
        return lagging


def _whole_log(store: MemoryStore, namespace: str) -> Iterator[LogEntry]:
    """Every rolling the log gives, oldest first, read a page at a time."""
    after = 0
    while page := store.read_log(namespace, after, limit=_PAGE):
        yield from page
        after = page[-1].seq


def totals_from_log(store: MemoryStore, namespace: str) -> RollingTotals:
    """`rolling_totals` from the log, for a backend without the inspection capability: every
    rolling whose unit is still stored, with its cost."""
    entries = list(_whole_log(store, namespace))
    return summed([e.cost for e in entries], sum(len(e.messages) for e in entries))


def summed(costs: Sequence[RollingCost], messages: int) -> RollingTotals:
    """The totals of these rollings' costs (oldest first), which rolled `messages`."""
    failed = [c for c in costs if c.fallbacks]
    return RollingTotals(
        rollings=len(costs),
        messages=messages,
        llm_calls=sum(c.llm_calls for c in costs),
        prompt_tokens=sum(c.prompt_tokens for c in costs),
        completion_tokens=sum(c.completion_tokens for c in costs),
        llm_ms=float(sum(c.llm_ms for c in costs)),
        pipeline_ms=float(sum(c.pipeline_ms for c in costs)),
        by_summarizer=dict(Counter(c.summarizer for c in costs)),
        fallbacks=len(failed),
        recent_fallbacks=tuple(c.fallbacks[0] for c in failed[::-1][:RECENT_FALLBACKS]),
    )
