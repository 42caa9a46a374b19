"""What the in-memory store holds: plain Python objects, one namespace per `NamespaceState`.

Each write verb works on a copy of the namespace it changes (`copy`, which
copies containers, never the immutable messages and slices) and swaps it in
when the verb succeeds, so every verb is all-or-nothing as a transaction is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from typing import Any

from partner_memory.errors import (
    ConfigurationError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    StorageUnavailableError,
)
from partner_memory.model import (
    Activation,
    ConsumerStatus,
    MemorySlice,
    Message,
    RollingCost,
    UnitInfo,
    UnitUpdate,
)
from partner_memory.store.contract.capabilities import (
    Capability,
    RecallRow,
    StoredItem,
    StoredKey,
    StoredRecord,
    TopicSlice,
)
from partner_memory.store.contract.refusals import already_stored, refuse_repeated_ids
from partner_memory.store.contract.rows import (
    cost_from_row,
    cost_params,
    first_generation,
    message_params,
)


@dataclass
class UnitState:
    """One unit: its messages by position, its slices in insertion order (with their
    sequence number, which orders slices of one time as the SQL backends' keys do)."""

    id: str
    order: int
    timestamp: int
    messages: list[Message] = field(default_factory=list)
    slices: list[tuple[int, MemorySlice]] = field(default_factory=list)

    def copy(self) -> UnitState:
        return replace(self, messages=list(self.messages), slices=list(self.slices))

    def slice_ids(self) -> set[str]:
        return {s.id for _, s in self.slices}


@dataclass(frozen=True, slots=True)
class WindowRow:
    message: Message
    structured: bool
    interaction: int | None


@dataclass(frozen=True, slots=True)
class RollingRow:
    """One row of the rolling log, the columns the SQL backends keep (and dump)."""

    seq: int
    unit_id: str
    slice_id: str
    started_at: int
    idle: bool
    messages: int
    cost: RollingCost
    rolling_size: int
    retain_divisor: int | None
    unit_slices: int
    holder: str

    @classmethod
    def from_tuple(cls, row: tuple[Any, ...]) -> RollingRow:
        """A row as the SQL backends dump it (`RollingRow.as_tuple`)."""
        values = (*row[:6], cost_from_row(row[6:13]), *row[13:])
        found = dict(zip([f.name for f in fields(cls)], values, strict=True))
        return cls(**found | {"idle": bool(found["idle"])})

    def as_tuple(self) -> tuple[Any, ...]:
        head = (self.seq, self.unit_id, self.slice_id, self.started_at, int(self.idle))
        tail = (self.rolling_size, self.retain_divisor, self.unit_slices, self.holder)
        return (*head, self.messages, *cost_params(self.cost), *tail)


@dataclass(frozen=True, slots=True)
class ConsumerRow:
    name: str
    durable: bool = True
    position: int = 0
    failures: int = 0
    last_error: str | None = None
    last_failure_at: int | None = None

    def status(self, head: int) -> ConsumerStatus:
        """As `consumer_status` gives it, in a namespace whose newest rolling is `head`."""
        failed = (self.failures, self.last_error, self.last_failure_at)
        return ConsumerStatus(self.name, self.durable, self.position, head, *failed)

    def as_tuple(self) -> tuple[Any, ...]:
        """The columns the SQL backends dump: name, durable, position, failures, error, at."""
        held = (self.position, self.failures, self.last_error, self.last_failure_at)
        return (self.name, int(self.durable), *held)


@dataclass
class NamespaceState:
    """Everything of one namespace."""

    name: str
    order: int
    session_id: str
    rolling_seq: int = 0
    units: dict[str, UnitState] = field(default_factory=dict)
    #: Where each stored message is: unit id and position.
    located: dict[str, tuple[str, int]] = field(default_factory=dict)
    window: list[WindowRow] = field(default_factory=list)
    #: (last interaction, idle rolled for) once a quiet was marked, as `activity` keeps.
    activity: tuple[int, int] | None = None
    #: (holder, expiry in ms of the wall clock).
    lease: tuple[str, int] | None = None
    rollings: list[RollingRow] = field(default_factory=list)
    consumers: dict[str, ConsumerRow] = field(default_factory=dict)
    records: dict[tuple[str, str], StoredRecord] = field(default_factory=dict)
    activation: Activation | None = None
    recall: dict[tuple[str, int], RecallRow] = field(default_factory=dict)
    recall_generation: int = field(default_factory=first_generation)
    recall_embedder: str | None = None
    topics: dict[tuple[str, str, str], TopicSlice] = field(default_factory=dict)
    #: Units copied in this write (the others are shared with the last committed state).
    _fresh: set[str] = field(default_factory=set, repr=False)

    def copy(self) -> NamespaceState:
        return replace(
            self,
            units=dict(self.units),
            located=dict(self.located),
            window=list(self.window),
            rollings=list(self.rollings),
            consumers=dict(self.consumers),
            records=dict(self.records),
            recall=dict(self.recall),
            topics=dict(self.topics),
            _fresh=set(),
        )

    def writable(self, unit_id: str) -> UnitState:
        """The unit, copied the first time this write changes it."""
        if unit_id not in self._fresh:
            self.units[unit_id] = self.units[unit_id].copy()
            self._fresh.add(unit_id)
        return self.units[unit_id]

    def window_ids(self) -> set[str]:
        return {row.message.id for row in self.window}

    def unit_rows(self) -> list[tuple[Any, ...]]:
        return [
            (u.id, u.timestamp, len(u.messages), len(u.slices))
            for u in sorted(self.units.values(), key=lambda u: u.order)
        ]

    def message_rows(self) -> list[tuple[Any, ...]]:
        return [
            (u.id, position, *message_params(m))
            for u in sorted(self.units.values(), key=lambda u: u.order)
            for position, m in enumerate(u.messages)
        ]

    def slice_rows(self) -> list[tuple[Any, ...]]:
        return [
            (u.id, s.id, s.start_index, s.end_index, s.summary, s.timestamp, s.summarizer)
            for u in sorted(self.units.values(), key=lambda u: u.order)
            for _, s in u.slices
        ]

    def window_rows(self) -> list[tuple[Any, ...]]:
        return [(*message_params(r.message), int(r.structured), r.interaction) for r in self.window]


SCHEME = "memory://"
_INT64 = (-(2**63), 2**63 - 1)


def bigint(value: int | None, what: str) -> None:
    """Refuse an integer no SQL column could hold, as the SQL backends do."""
    if value is not None and not _INT64[0] <= value <= _INT64[1]:
        raise InvalidInputError(f"{what} {value} is out of range for a 64-bit integer")


class SharedMemory:
    """What every store of one `memory://` name holds, under one lock."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.namespaces: dict[str, NamespaceState] = {}
        self.order = 0
        self.keys: list[StoredKey] = []
        #: (namespace, kind, target, at) of every forget, oldest first.
        self.forgets: list[tuple[str, str, str, int]] = []
        #: Items by (namespace, key).
        self.items: dict[tuple[str, str], StoredItem] = {}

    def next_order(self) -> int:
        self.order += 1
        return self.order


_NAMED: dict[str, SharedMemory] = {}
_NAMED_LOCK = threading.Lock()


def now_ms() -> int:
    return int(time.time() * 1000)


class MemoryBase:
    """The lock and the all-or-nothing writes every verb of the in-memory store uses."""

    capabilities: frozenset[Capability] = frozenset()

    def __init__(self, name: str = "", *, read_only: bool = False) -> None:
        if name:
            with _NAMED_LOCK:
                self._shared = _NAMED.setdefault(name, SharedMemory())
        else:
            self._shared = SharedMemory()
        self._name = name
        self._read_only = read_only
        self._closed = False

    @property
    def url(self) -> str:
        return SCHEME + self._name

    @property
    def read_only(self) -> bool:
        return self._read_only

    def close(self) -> None:
        self._closed = True

    # -- transactions ----------------------------------------------------------------

    @contextmanager
    def _reading(self) -> Iterator[SharedMemory]:
        if self._closed:
            raise StorageUnavailableError(f"the store {self.url} is closed")
        with self._shared.lock:
            yield self._shared

    @contextmanager
    def _writing(self) -> Iterator[SharedMemory]:
        if self._read_only:
            raise ConfigurationError(f"database {self.url} is opened read-only")
        with self._reading() as shared:
            yield shared

    def _state(self, shared: SharedMemory, namespace: str) -> NamespaceState:
        found = shared.namespaces.get(namespace)
        if found is None:
            raise NotFoundError(f"namespace {namespace!r} not found")
        return found

    @contextmanager
    def _changing(self, namespace: str, *, creating: str | None = None) -> Iterator[NamespaceState]:
        """A copy of the namespace to change; it replaces the namespace if the block ends
        without an exception (all or nothing). `creating` (a session id): a namespace that
        does not exist yet is made, in the same all-or-nothing write."""
        with self._writing() as shared:
            if creating is not None and namespace not in shared.namespaces:
                draft = NamespaceState(namespace, shared.next_order(), creating)
            else:
                draft = self._state(shared, namespace).copy()
            yield draft
            shared.namespaces[namespace] = draft

    def _open_unit(self, state: NamespaceState, unit_id: str, timestamp: int) -> UnitState:
        if unit_id not in state.units:
            state.units[unit_id] = UnitState(unit_id, self._shared.next_order(), timestamp)
            state._fresh.add(unit_id)
        return state.writable(unit_id)

    def _extend(
        self,
        state: NamespaceState,
        unit: UnitState,
        timestamp: int,
        messages: Sequence[Message],
        slices: Sequence[MemorySlice],
    ) -> None:
        taken = unit.slice_ids()
        for s in slices:
            if s.id in taken:
                raise ConflictError(f"slice {s.id!r} already exists in unit {unit.id!r}")
            taken.add(s.id)
        bigint(timestamp, "unit timestamp")
        first = len(unit.messages)
        for offset, message in enumerate(messages):
            state.located[message.id] = (unit.id, first + offset)
        unit.messages.extend(messages)
        unit.slices.extend((self._shared.next_order(), s) for s in slices)
        unit.timestamp = timestamp

    def append_slice(
        self, state: NamespaceState, messages: Sequence[Message], template: MemorySlice
    ) -> UnitUpdate:
        """R5 inside a write: extend the current session's unit by a slice."""
        ids = [m.id for m in messages]
        refuse_repeated_ids(ids, "update")
        stored = [i for i in ids if i in state.located]
        if stored:
            raise already_stored(min(stored), state.name)
        unit = self._open_unit(state, state.session_id, template.timestamp)
        first = len(unit.messages)
        made = replace(template, start_index=first, end_index=first + len(messages))
        self._extend(state, unit, template.timestamp, messages, [made])
        info = UnitInfo(unit.id, template.timestamp, len(unit.messages), len(unit.slices))
        return UnitUpdate(unit=info, slice=made)


def release(state: NamespaceState, holder: str) -> None:
    if state.lease is not None and state.lease[0] == holder:
        state.lease = None


def mark_idle(state: NamespaceState, last_interaction: int) -> None:
    first = last_interaction if state.activity is None else state.activity[0]
    state.activity = (first, last_interaction)
