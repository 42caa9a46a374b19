"""MemoryCore (R4-R7): one namespace's memory session and units, over any store.

The current session id lives in the store, not in this object, so several
processes sharing a PostgreSQL database agree on which unit rolling extends.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from partner_memory.clock import Clock, system_clock
from partner_memory.errors import InvalidInputError, NotFoundError
from partner_memory.model import (
    MemorySlice,
    MemoryUnit,
    Message,
    Record,
    RollingTotals,
    UnitInfo,
    UnitUpdate,
    check_index,
    check_messages,
    check_namespace,
    check_text,
    check_timestamp,
    new_id,
)
from partner_memory.provenance import SliceReading, provenance
from partner_memory.settings import DEFAULT_NAMESPACE
from partner_memory.store.contract.base import MemoryStore, NewSlice, UnitQuery
from partner_memory.store.contract.capabilities import (
    INSPECTION,
    ForgetStore,
    require,
    supports,
)
from partner_memory.store.contract.derived import totals_from_log

MAX_PAGE_SIZE = 1000
#: Far beyond any namespace, and within every backend's 64-bit integers.
MAX_OFFSET = 2**62
#: How many namespace names a "not found" error suggests.
KNOWN_SHOWN = 5


@dataclass(frozen=True, slots=True)
class UnitPage(Record):
    """One page of units, newest first, with the total that matched."""

    units: list[UnitInfo]
    total: int
    offset: int
    limit: int
    #: The unit to pass as `after` for the next page; None on the last page.
    next_after: str | None = None


class MemoryCore:
    """The read/write entry point of one namespace's memory; safe to share between threads."""

    def __init__(
        self,
        store: MemoryStore,
        namespace: str = DEFAULT_NAMESPACE,
        *,
        clock: Clock = system_clock,
        create: bool = True,
    ) -> None:
        self._store = store
        self._namespace = check_namespace(namespace)
        self._clock = clock
        self._lock = threading.Lock()
        if create and not (store.read_only and store.get_namespace(self._namespace)):
            store.ensure_namespace(self._namespace, new_id())  # a read-only store refuses it
        elif not create and store.get_namespace(self._namespace) is None:
            first = store.list_namespaces(limit=KNOWN_SHOWN + 1)
            known = ", ".join(repr(n.name) for n in first[:KNOWN_SHOWN]) or "none"
            if len(first) > KNOWN_SHOWN:
                known += ", ... (`partner-memory namespaces` lists them all)"
            raise NotFoundError(f"namespace {self._namespace!r} not found (known: {known})")

    @property
    def namespace(self) -> str:
        return self._namespace

    @property
    def store(self) -> MemoryStore:
        return self._store

    @property
    def memory_session_id(self) -> str:
        """The session whose unit the next update extends (R4)."""
        info = self._store.get_namespace(self._namespace)
        if info is None:  # forgotten since this core was made
            raise NotFoundError(f"namespace {self._namespace!r} not found")
        return info.memory_session_id

    def refresh_memory_session(self) -> str:
        """Start a new memory session, so the next update opens a new unit (R7)."""
        session_id = new_id()
        with self._lock:
            self._store.set_session(self._namespace, session_id)
        return session_id

    def update_memory_unit(
        self,
        messages: Iterable[Message],
        summary: str,
        *,
        summarizer: str | None = None,
        timestamp: int | None = None,
    ) -> UnitUpdate:
        """R5: append `messages` to the current session's unit with a slice summarising them.

        `summarizer` records which summariser wrote `summary`; `timestamp` (ms)
        overrides "now", for replays that carry their own time.
        """
        batch = check_messages(messages)
        check_text(summary, "summary")
        with self._lock:
            at = self._clock() if timestamp is None else timestamp
            new = NewSlice(new_id(), summary, at, summarizer)
            return self._store.append(self._namespace, batch, new)

    # -- lookups (R7): unknown ids raise NotFoundError, nothing is created -------

    def resolve_unit_id(self, given: str) -> str:
        """The unit an id or an unambiguous prefix of one names (as git resolves commits)."""
        check_text(given, "unit id")
        if self._store.get_unit(self._namespace, given) is not None:
            return given
        found = self._store.unit_ids_starting(self._namespace, given, limit=3) if given else []
        return _one(found, given, f"unit in namespace {self._namespace!r}")

    def resolve_slice(self, unit: str, given: str) -> tuple[str, str]:
        """The (unit id, slice id) that a unit id or prefix and a slice id or prefix name."""
        unit_id = self.resolve_unit_id(unit)
        check_text(given, "slice id")
        ids = [s.id for s in self.list_slices(unit_id)]
        if given in ids:
            return unit_id, given
        found = [i for i in ids if given and i.startswith(given)]
        return unit_id, _one(found, given, f"slice in unit {unit_id!r}")

    def get_unit_info(self, unit_id: str) -> UnitInfo:
        info = self._store.get_unit(self._namespace, check_text(unit_id, "unit id"))
        if info is None:
            raise NotFoundError(f"unit {unit_id!r} not found in namespace {self._namespace!r}")
        return info

    def get_memory_unit(self, unit_id: str) -> MemoryUnit:
        """The whole unit, every message included; prefer `read_messages` for large units."""
        info = self.get_unit_info(unit_id)
        return MemoryUnit(
            id=info.id,
            timestamp=info.timestamp,
            conversation_messages=tuple(
                self._store.read_messages(self._namespace, unit_id, 0, info.message_count)
            ),
            slices=tuple(self._store.read_slices(self._namespace, unit_id)),
        )

    def list_slices(self, unit_id: str) -> list[MemorySlice]:
        self.get_unit_info(unit_id)
        return self._store.read_slices(self._namespace, unit_id)

    def get_memory_slice(self, unit_id: str, slice_id: str) -> MemorySlice:
        self.get_unit_info(unit_id)
        found = self._store.get_slice(self._namespace, unit_id, check_text(slice_id, "slice id"))
        if found is None:
            raise NotFoundError(f"slice {slice_id!r} not found in unit {unit_id!r}")
        return found

    def read_messages(self, unit_id: str, start: int = 0, end: int | None = None) -> list[Message]:
        """Messages [start, end) of a unit; `end` defaults to the unit's length."""
        info = self.get_unit_info(unit_id)
        start = check_index(start, "start")
        stop = info.message_count if end is None else check_index(end, "end")
        if start < 0 or stop < 0:
            raise InvalidInputError(f"message range [{start}, {stop}) has a negative index")
        if start > stop:
            raise InvalidInputError(f"message range [{start}, {stop}) ends before it starts")
        return self._store.read_messages(self._namespace, unit_id, start, stop)

    def read_slice(self, unit_id: str, slice_id: str) -> SliceReading:
        """A slice, the original messages it covers, and the messages each sentence of its
        summary came from (`provenance`: derived from the two, so always in step)."""
        memory_slice = self.get_memory_slice(unit_id, slice_id)
        messages = self._covered(unit_id, memory_slice)
        return SliceReading(
            self._namespace,
            unit_id,
            memory_slice,
            tuple(messages),
            tuple(provenance(memory_slice, messages)),
        )

    def read_slice_messages(self, unit_id: str, slice_id: str) -> list[Message]:
        """The original messages a slice summarises: the point of the design."""
        return self._covered(unit_id, self.get_memory_slice(unit_id, slice_id))

    def _covered(self, unit_id: str, memory_slice: MemorySlice) -> list[Message]:
        return self._store.read_messages(
            self._namespace, unit_id, memory_slice.start_index, memory_slice.end_index
        )

    def list_units(
        self,
        *,
        limit: int = 20,
        offset: int = 0,
        since: int | None = None,
        until: int | None = None,
        after: str | None = None,
    ) -> UnitPage:
        """Units newest first; `since` (inclusive) and `until` (exclusive) are ms timestamps.

        `after` (a unit id: the previous page's last) pages at a cost that follows
        `limit`; an `offset` is read from whichever end of the list is nearer, so the
        first and the last pages are both cheap.
        """
        limit, offset = check_index(limit, "limit"), check_index(offset, "offset")
        if not 1 <= limit <= MAX_PAGE_SIZE:
            raise InvalidInputError(f"limit must be between 1 and {MAX_PAGE_SIZE}, got {limit}")
        if not 0 <= offset <= MAX_OFFSET:
            raise InvalidInputError(f"offset must be between 0 and {MAX_OFFSET}, got {offset}")
        if after is not None and offset:
            raise InvalidInputError("give either after or offset, not both")
        for name, bound in (("since", since), ("until", until)):
            if bound is not None:
                check_timestamp(bound, name)
        if after is not None:
            check_text(after, "after")
        total = self._store.count_units(self._namespace, since=since, until=until)
        ns = self._namespace
        if after is None and total // 2 < offset < total:
            shown = min(limit, total - offset)  # the same rows, counted from the oldest
            units = self._store.list_units(
                ns,
                UnitQuery(
                    limit=shown,
                    offset=total - offset - shown,
                    since=since,
                    until=until,
                    oldest_first=True,
                ),
            )
            units.reverse()
            more = offset + shown < total
        else:  # one more than asked: whether a next page exists
            units = self._store.list_units(
                ns, UnitQuery(limit=limit + 1, offset=offset, since=since, until=until, after=after)
            )
            more, units = len(units) > limit, units[:limit]
        next_after = units[-1].id if more else None
        return UnitPage(units, total, offset, limit, next_after)

    def rolling_stats(self) -> RollingTotals:
        """Totals over every rolling (messages, LLM calls, tokens, time) and consumer status."""
        if supports(self._store, INSPECTION):
            totals = require(self._store, INSPECTION).rolling_totals(self._namespace)
        else:  # a core-only backend: the log carries each rolling's cost
            totals = totals_from_log(self._store, self._namespace)
        return replace(totals, consumers=tuple(self._store.consumer_status(self._namespace)))

    def known_ids(self, message_ids: Sequence[str]) -> set[str]:
        """Which of these message ids the units hold, or a forget named (where the backend
        forgets): what a framework resending a conversation must not record again."""
        if not message_ids:
            return set()
        known = self._store.stored_message_ids(self._namespace, message_ids)
        if isinstance(self._store, ForgetStore):
            known |= self._store.forgotten_messages(self._namespace, message_ids)
        return known

    def unit_ids(self) -> list[str]:
        """Every unit id, oldest first (the reference's `memory_unit_uuid_set`)."""
        return self._store.unit_ids(self._namespace)


def _one(found: list[str], given: str, what: str) -> str:
    if not found:
        raise NotFoundError(f"{what.split(' in ', maxsplit=1)[0]} {given!r} not found ({what})")
    if len(found) > 1:
        shown = ", ".join(found[:2]) + (", ..." if len(found) > 2 else "")
        raise InvalidInputError(f"{given!r} is ambiguous: it begins {shown} ({what})")
    return found[0]
