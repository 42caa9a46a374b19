"""The in-memory core: namespaces, units, the window, the lease and the log, in plain
Python - the twenty verbs a backend writes, the rest derived (`store.derived`).

One lock serialises the verbs; each write copies the containers of the
namespace it changes (not the messages), so it costs what the namespace
holds: right for tests and examples, not for a large memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase

from partner_memory.errors import (
    InvalidInputError,
    NotFoundError,
)
from partner_memory.model import (
    Activation,
    ContextState,
    MemorySlice,
    Message,
    NamespaceInfo,
    TrajectoryState,
    UnitInfo,
    newest,
)
from partner_memory.store.contract.base import (
    AppendOptions,
    BulkWrite,
    UnitQuery,
    WindowAppend,
)
from partner_memory.store.contract.capabilities import HELD_BLOCKS_KEY
from partner_memory.store.contract.derived import DerivedVerbs
from partner_memory.store.contract.refusals import batch_ids, unit_changed
from partner_memory.store.memory.log import LogMixin
from partner_memory.store.memory.state import (
    NamespaceState,
    SharedMemory,
    UnitState,
    WindowRow,
    bigint,
    now_ms,
)


class InMemoryCore(LogMixin, DerivedVerbs):
    """The core contract kept in this process's memory and nothing more: the twenty
    essential verbs (`store.derived.ESSENTIAL`), every other one from `DerivedVerbs` -
    what a new backend writes, and what `partner_memory.testing` is run on without a
    capability."""

    # -- namespaces ----------------------------------------------------------------

    @staticmethod
    def _info(state: NamespaceState) -> NamespaceInfo:
        slices = sum(len(u.slices) for u in state.units.values())
        return NamespaceInfo(state.name, state.session_id, len(state.units), slices)

    def ensure_namespace(self, namespace: str, session_id: str) -> NamespaceInfo:
        with self._writing() as shared:
            if namespace not in shared.namespaces:
                shared.namespaces[namespace] = NamespaceState(
                    namespace, shared.next_order(), session_id
                )
            return self._info(shared.namespaces[namespace])

    def _names(
        self, shared: SharedMemory, matching: str | None, after: str | None = None
    ) -> list[str]:
        return sorted(
            n
            for n in shared.namespaces
            if (matching is None or fnmatchcase(n, matching)) and (after is None or n > after)
        )

    def list_namespaces(
        self, *, limit: int | None = None, after: str | None = None, matching: str | None = None
    ) -> list[NamespaceInfo]:
        bigint(limit, "limit")
        with self._reading() as shared:
            names = self._names(shared, matching, after)[:limit]
            return [self._info(shared.namespaces[n]) for n in names]

    # -- units -----------------------------------------------------------------------

    def write_units(self, namespace: str, bulk: BulkWrite) -> None:
        with self._changing(namespace, creating=bulk.session_id) as state:
            state.session_id = bulk.session_id
            for write in bulk.units:
                unit = self._open_unit(state, write.id, write.timestamp)
                if len(unit.messages) != write.expected_count:
                    raise unit_changed(
                        write.id, namespace, len(unit.messages), write.expected_count
                    )
                self._extend(state, unit, write.timestamp, write.messages, write.slices)
            if bulk.trajectory is not None:
                state.window = [WindowRow(m, False, None) for m in bulk.trajectory]

    def _units_between(
        self, state: NamespaceState, since: int | None, until: int | None
    ) -> list[UnitState]:
        bigint(since, "since")
        bigint(until, "until")
        return [
            u
            for u in state.units.values()
            if (since is None or u.timestamp >= since) and (until is None or u.timestamp < until)
        ]

    def list_units(self, namespace: str, query: UnitQuery) -> list[UnitInfo]:
        limit, offset, after, oldest_first = (
            query.limit,
            query.offset,
            query.after,
            query.oldest_first,
        )
        bigint(limit, "limit")
        bigint(offset, "offset")
        with self._reading() as shared:
            state = self._state(shared, namespace)
            units = sorted(
                self._units_between(state, query.since, query.until),
                key=lambda u: (u.timestamp, u.order),
                reverse=not oldest_first,
            )
            if after is not None:
                anchor = state.units.get(after)
                if anchor is None:
                    raise NotFoundError(f"unit {after!r} not found in namespace {namespace!r}")
                key = (anchor.timestamp, anchor.order)
                units = [u for u in units if _beyond((u.timestamp, u.order), key, oldest_first)]
            return [_unit_info(u) for u in units[offset : offset + limit]]

    def _unit(self, shared: SharedMemory, namespace: str, unit_id: str) -> UnitState | None:
        found = shared.namespaces.get(namespace)
        return None if found is None else found.units.get(unit_id)

    def read_excerpts(
        self, namespace: str, ranges: Sequence[tuple[str, int, int]]
    ) -> list[tuple[list[Message], list[MemorySlice]]]:
        found: list[tuple[list[Message], list[MemorySlice]]] = []
        with self._reading() as shared:
            for unit_id, start, end in ranges:
                unit = self._unit(shared, namespace, unit_id)
                if unit is None:
                    found.append(([], []))
                    continue
                over = [s for s in _ordered(unit) if s.start_index < end and s.end_index > start]
                found.append((unit.messages[max(0, start) : max(0, end)], over))
        return found

    def read_slices(self, namespace: str, unit_id: str) -> list[MemorySlice]:
        with self._reading() as shared:
            unit = self._unit(shared, namespace, unit_id)
            return [] if unit is None else _ordered(unit)

    # -- the window, its activity and the lease ---------------------------------------

    @staticmethod
    def _trajectory(state: NamespaceState) -> TrajectoryState:
        rolled = None if state.activity is None or state.activity[1] < 0 else state.activity[1]
        return TrajectoryState(
            [r.message for r in state.window], tuple(r.interaction for r in state.window), rolled
        )

    def load_trajectory(self, namespace: str) -> TrajectoryState:
        with self._reading() as shared:
            return self._trajectory(self._state(shared, namespace))

    def append_trajectory(
        self, namespace: str, messages: Sequence[Message], options: AppendOptions | None = None
    ) -> WindowAppend:
        ids, how = batch_ids(messages), options or AppendOptions()
        last_interaction = how.last_interaction
        bigint(last_interaction, "last interaction")
        with self._changing(namespace) as state:
            if not how.fresh_ids:
                stored = [i for i in ids if i in state.located]
                if stored:
                    raise InvalidInputError(
                        f"message id {stored[0]!r} is already stored in namespace {namespace!r}"
                    )
            if how.drop_structured:
                state.window = [r for r in state.window if not r.structured]
            held = state.window_ids()
            again = next((i for i in ids if i in held), None)
            if again is not None:
                raise InvalidInputError(f"message id {again!r} is already in the trajectory")
            before = newest(
                r.interaction
                for r in state.window
                if r.interaction is not None
                and r.interaction < (-1 if last_interaction is None else last_interaction)
            )
            state.window += [
                WindowRow(m, m.id in how.structured, last_interaction) for m in messages
            ]
            return WindowAppend(len(state.window), before)

    def begin_rolling(
        self, namespace: str, holder: str, *, ttl_ms: int, replacing: str | None = None
    ) -> TrajectoryState | None:
        now = now_ms()
        with self._changing(namespace) as state:
            lease = state.lease
            if lease is not None and not (lease[1] < now or lease[0] == (replacing or "")):
                return None
            state.lease = (holder, now + ttl_ms)
            return self._trajectory(state)

    def renew_leases(self, holder: str, *, ttl_ms: int) -> None:
        with self._writing() as shared:
            until = now_ms() + ttl_ms
            for state in shared.namespaces.values():
                if state.lease is not None and state.lease[0] == holder:
                    state.lease = (holder, until)

    def rolling_holder(self, namespace: str) -> str | None:
        with self._reading() as shared:
            lease = self._state(shared, namespace).lease
            return lease[0] if lease is not None and lease[1] >= now_ms() else None

    def context_state(self, namespace: str, *, slices: int) -> ContextState:
        with self._reading() as shared:
            state = self._state(shared, namespace)
            held = shared.items.get((namespace, HELD_BLOCKS_KEY))
            value = None if held is None or held.expires_at is not None else held.value
            return ContextState(_recent(state, slices), state.activation, value)

    def set_activation(self, namespace: str, activation: Activation | None) -> None:
        with self._changing(namespace) as state:
            state.activation = activation


def _beyond(at: tuple[int, int], key: tuple[int, int], oldest_first: bool) -> bool:
    """Whether a unit at `at` follows the unit at `key` in the listing's order."""
    return at > key if oldest_first else at < key


def _unit_info(unit: UnitState) -> UnitInfo:
    return UnitInfo(unit.id, unit.timestamp, len(unit.messages), len(unit.slices))


def _ordered(unit: UnitState) -> list[MemorySlice]:
    return [s for _, s in sorted(unit.slices, key=lambda p: (p[1].timestamp, p[0]))]


def _recent(state: NamespaceState, limit: int) -> list[tuple[str, MemorySlice]]:
    every = [(s.timestamp, order, u.id, s) for u in state.units.values() for order, s in u.slices]
    every.sort(key=lambda t: (t[0], t[1]), reverse=True)
    return [(unit_id, s) for _, _, unit_id, s in every[:limit]]
