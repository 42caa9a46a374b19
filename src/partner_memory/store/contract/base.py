"""The core store contract: what every backend implements, in three layers.

`UnitStore` keeps namespaces, units, messages and slices; `WindowStore` adds a
namespace's live state (window, activity, rolling lease, the context's
activation); `LogStore` adds the ordered rolling log, its commits and the
followers that track their position in it. `MemoryStore` is the three; what a
backend may offer beyond them (keys, topics, recall rows, forgetting, dumps,
inspection) is in `store.capabilities`. Everything richer (sessions, paging,
slice-to-message reads, import/export) is built once on top, never per
backend. Six core verbs have defaults made from the others, for a backend to
inherit (`store.derived.DerivedVerbs`); `partner_memory.testing` holds the
tests a backend passes. Each verb is one transaction and all-or-nothing.
Unless a verb says otherwise, an unknown namespace raises NotFoundError,
refused input InvalidInputError, a lost race ConflictError, and an
unreachable or locked database StorageUnavailableError.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, runtime_checkable

from partner_memory.model import (
    Activation,
    ConsumerStatus,
    ContextState,
    LogEntry,
    MemorySlice,
    Message,
    NamespaceInfo,
    RollingCost,
    TrajectoryState,
    UnitInfo,
    UnitUpdate,
    WindowActivity,
)
from partner_memory.store.contract.capabilities import Capability
from partner_memory.store.contract.staged import StagedRollings


@dataclass(frozen=True, slots=True)
class NewSlice:
    """A slice `append` adds: where it starts and ends in its unit is the store's to say."""

    id: str
    summary: str
    timestamp: int
    summarizer: str | None = None

    def placed(self, start: int, end: int) -> MemorySlice:
        return MemorySlice(self.id, start, end, self.summary, self.timestamp, self.summarizer)


@dataclass(frozen=True, slots=True)
class UnitQuery:
    """A page of a namespace's units: newest first (or oldest first), `since` inclusive
    and `until` exclusive, in ms. `after` a unit id, those that follow it in that order
    (keyset paging: the cost follows `limit`, where `offset` costs what it skips)."""

    limit: int
    offset: int = 0
    since: int | None = None
    until: int | None = None
    after: str | None = None
    oldest_first: bool = False


@dataclass(frozen=True, slots=True)
class UnitWrite:
    """Bulk write of one unit: append `messages` after the first `expected_count` ones.

    `expected_count` is what the writer saw when it planned the write; a store
    holding a different count refuses the whole batch with ConflictError,
    which makes imports safe against a concurrent writer.
    """

    id: str
    timestamp: int
    expected_count: int
    messages: Sequence[Message]
    slices: Sequence[MemorySlice]


@dataclass(frozen=True, slots=True)
class BulkWrite:
    """What `write_units` writes at once: the units, the namespace's session after them,
    and the window to replace (None: the window stays)."""

    session_id: str
    units: Sequence[UnitWrite]
    trajectory: Sequence[Message] | None = None


@dataclass(frozen=True, slots=True)
class RollingCommit:
    """Everything one rolling writes, committed at once by `commit_rolling`."""

    #: The lease holder; the commit is refused if the lease is no longer its.
    holder: str
    #: The increment (R16), stored as a new slice; empty: no slice, no log entry.
    messages: Sequence[Message]
    summary: str
    slice_id: str
    timestamp: int
    cost: RollingCost
    #: Window message ids to remove (R12).
    drop: Sequence[str]
    rolling_size: int
    retain_divisor: int | None
    idle: bool
    #: The last interaction an idle rolling covers (R14 fires once per quiet).
    last_interaction: int | None = None
    #: A new memory session to switch to (after an idle rolling), or None.
    new_session_id: str | None = None


@dataclass(frozen=True, slots=True)
class ReplayStep:
    """One step of a replay, as live recording would have done it: messages recorded in
    one interaction (stamped with its time), then the rolling they triggered, if any."""

    messages: Sequence[Message]
    interaction: int | None
    #: Ids among `messages` that are structured prompts (R10).
    structured: frozenset[str] = frozenset()
    rolling: RollingCommit | None = None
    #: Each message's own interaction time, where they differ (a replay's batch of
    #: messages recorded one by one live); empty: all are `interaction`.
    interactions: Sequence[int | None] = ()


@dataclass(frozen=True, slots=True)
class CommittedRolling:
    """What `commit_rolling` wrote: the unit update and log position, if a slice was stored;
    and, where the backend can say so exactly, the log entry `read_log` will give for it
    and the namespace's generation it was committed in (this process's followers take it
    unread: `rolling.follow`)."""

    update: UnitUpdate | None
    seq: int | None
    #: Not part of what was written (two equal rollings of two namespaces compare equal).
    logged: LogEntry | None = field(default=None, compare=False)
    generation: int | None = field(default=None, compare=False)


class FollowerPosition(NamedTuple):
    """Where a durable consumer stands in a namespace's log (0: it applied nothing yet),
    and the namespace's generation then: what `advance_consumer` is conditioned on."""

    position: int
    generation: int


@runtime_checkable
class UnitStore(Protocol):
    """Durable, namespaced storage of memory units and slices."""

    @property
    def url(self) -> str:
        """Where the store lives, safe to print (no password)."""
        ...

    @property
    def read_only(self) -> bool:
        """True when opened read-only: every write verb raises ConfigurationError."""
        ...

    @property
    def capabilities(self) -> frozenset[Capability]:
        """Properties of how the backend may be deployed (`Capability`); the verbs it
        offers beyond the core are detected instead (`store.capabilities.supports`)."""
        ...

    def ensure_namespace(self, namespace: str, session_id: str) -> NamespaceInfo:
        """Get a namespace, creating it with `session_id` when it does not exist."""
        ...

    def get_namespace(self, namespace: str) -> NamespaceInfo | None: ...

    def list_namespaces(
        self, *, limit: int | None = None, after: str | None = None, matching: str | None = None
    ) -> list[NamespaceInfo]:
        """Namespaces by name; `after` a name, the next `limit` of them (keyset paging);
        `matching` keeps the names a key's glob matches (`fnmatchcase`), in the query."""
        ...

    def count_namespaces(self, *, matching: str | None = None) -> int: ...

    def set_session(self, namespace: str, session_id: str) -> None:
        """Make `session_id` the namespace's current memory session."""
        ...

    def append(self, namespace: str, messages: Sequence[Message], new: NewSlice) -> UnitUpdate:
        """R5 in one transaction: get-or-create the current session's unit and extend it.

        Raises ConflictError if a message id is already stored in the namespace.
        """
        ...

    def write_units(self, namespace: str, bulk: BulkWrite) -> None:
        """Create or extend many units, set the session and (if given) replace the
        trajectory, all or nothing (a namespace not there yet is made)."""
        ...

    def get_unit(self, namespace: str, unit_id: str) -> UnitInfo | None: ...

    def list_units(self, namespace: str, query: UnitQuery) -> list[UnitInfo]:
        """The units `query` picks, in its order. Raises NotFoundError for an unknown
        `query.after`."""
        ...

    def count_units(
        self, namespace: str, *, since: int | None = None, until: int | None = None
    ) -> int: ...

    def unit_ids_starting(self, namespace: str, prefix: str, *, limit: int) -> list[str]:
        """Unit ids that begin with `prefix` (case-sensitive), at most `limit` of them."""
        ...

    def unit_ids(self, namespace: str) -> list[str]:
        """Every unit id of a namespace in creation order (the reference's unit set)."""
        ...

    def read_messages(self, namespace: str, unit_id: str, start: int, end: int) -> list[Message]:
        """Messages at positions [start, end) of a unit, in order."""
        ...

    def read_excerpts(
        self, namespace: str, ranges: Sequence[tuple[str, int, int]]
    ) -> list[tuple[list[Message], list[MemorySlice]]]:
        """For each (unit id, start, end): the messages of that range and the slices
        over it, all read in one transaction (empty lists for an unknown unit)."""
        ...

    def read_slices(self, namespace: str, unit_id: str) -> list[MemorySlice]:
        """A unit's slices ordered by timestamp (R2)."""
        ...

    def get_slice(self, namespace: str, unit_id: str, slice_id: str) -> MemorySlice | None: ...

    def stored_message_ids(self, namespace: str, message_ids: Sequence[str]) -> set[str]:
        """Which of these ids are already stored in one of the namespace's units."""
        ...

    def find_messages(self, namespace: str, message_ids: Sequence[str]) -> dict[str, Message]:
        """The stored messages among these ids, by id (ids not stored are absent)."""
        ...

    def recent_slices(self, namespace: str, limit: int) -> list[tuple[str, MemorySlice]]:
        """The newest slices of the namespace as (unit id, slice), newest first."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class AppendOptions:
    """How `append_trajectory` appends. `last_interaction` (ms), if given, becomes the
    namespace's; `structured` names the ids of structured prompts among the messages,
    and `drop_structured` first removes those the window holds (R10); `fresh_ids`
    (ids just made) skips the check that no unit stores them."""

    last_interaction: int | None = None
    structured: Collection[str] = ()
    drop_structured: bool = False
    fresh_ids: bool = False


class WindowAppend(NamedTuple):
    """What an append to the window leaves: the window's length, and the newest
    interaction before the appended one (None: none, or no interaction given) - a
    quiet gap between the two is a memory session's end."""

    length: int
    previous_interaction: int | None


@runtime_checkable
class WindowStore(Protocol):
    """A namespace's live state, shared by every process: window, activity, rolling lease."""

    def load_trajectory(self, namespace: str) -> TrajectoryState:
        """The persisted conversation window, oldest first (R9), and its activity."""
        ...

    def trajectory_length(self, namespace: str) -> int: ...

    def window_activity(self, namespace: str) -> WindowActivity:
        """The window's length, last interaction and quiet already rolled; no message read."""
        ...

    def append_trajectory(
        self, namespace: str, messages: Sequence[Message], options: AppendOptions | None = None
    ) -> WindowAppend:
        """Append to the window in recording order, as `options` say; returns its new
        length and the newest interaction before `options.last_interaction`. An id
        already in the window, or stored in a unit, raises InvalidInputError."""
        ...

    def begin_rolling(
        self, namespace: str, holder: str, *, ttl_ms: int, replacing: str | None = None
    ) -> TrajectoryState | None:
        """Take the namespace's rolling lease for `ttl_ms` and snapshot the window.

        None if another holder's lease has not expired (R15 across processes).
        A lease a killed process left behind expires on its own; `replacing`
        takes over the lease of that holder at once (one known to be dead).
        """
        ...

    def renew_leases(self, holder: str, *, ttl_ms: int) -> None:
        """Extend every lease `holder` holds, while its rollings are still running."""
        ...

    def release_rolling(self, namespace: str, holder: str) -> None: ...

    def rolling_holder(self, namespace: str) -> str | None:
        """Who holds the namespace's unexpired rolling lease, if anyone."""
        ...

    def idle_candidates(self, before: int, among: Sequence[str]) -> list[str]:
        """Which of `among` are quiet since before `before` (ms), not yet rolled for it."""
        ...

    def context_state(self, namespace: str, *, slices: int) -> ContextState:
        """What the namespace's context is made of, in one read: its `slices` newest
        slices (newest first, forgotten ones included with an empty summary) and the
        latest recall's activation."""
        ...

    def set_activation(self, namespace: str, activation: Activation | None) -> None:
        """Replace the namespace's activation (None: clear it). A forget of a message,
        slice or unit it quotes removes it in the forget's transaction."""
        ...


@runtime_checkable
class LogStore(Protocol):
    """The ordered per-namespace rolling log, and the consumers that follow it."""

    def commit_rolling(self, namespace: str, commit: RollingCommit) -> CommittedRolling:
        """Store the slice, log it, trim the window, switch session, release the lease: at once.

        Raises ConflictError if the lease is not the committer's, or a message
        of the increment is already stored.
        """
        ...

    def commit_replay(
        self, namespace: str, holder: str, steps: Sequence[ReplayStep]
    ) -> list[CommittedRolling]:
        """Write many recordings and rollings in one transaction, as if one by one.

        A replay plans its rollings under the lease (`holder`) and writes them
        together: the window ends as it would have, every rolling is logged in
        order, and the lease is released. A crash leaves all of it or none, so
        a re-run resumes as after any rolling. Returns one result per rolling step.
        Raises ConflictError as `commit_rolling` does.
        """
        ...

    def log_head(self, namespace: str) -> int:
        """The sequence number of the namespace's newest rolling (0: none)."""
        ...

    def read_log(self, namespace: str, after: int, *, limit: int = 100) -> list[LogEntry]:
        """Rollings with sequence numbers above `after`, oldest first."""
        ...

    def consumer_position(self, consumer: str, namespace: str) -> FollowerPosition:
        """Where `consumer` stands in the namespace's log, and the namespace's generation
        (a forget or reindex moves it on); NotFoundError for an unknown namespace."""
        ...

    def advance_consumer(
        self, consumer: str, namespace: str, expected: FollowerPosition, staged: StagedRollings
    ) -> None:
        """In one transaction: if the consumer still stands at `expected` (its position,
        and the namespace's generation), write each rolling's staged writes
        (`store.staged`, refused with InvalidInputError unless the backend keeps them:
        `staged.checked`) and move the consumer to the last rolling's sequence number.
        Else ConflictError and nothing is written: another process moved it on, or a
        forget changed what the rollings hold - read them again. Writes of a rolling
        whose unit is gone are dropped. The rollings are the log's next ones after
        `expected.position`, in order (the caller read them with `read_log`)."""
        ...

    def lagging_namespaces(self, consumer: str, *, limit: int = 1000) -> list[str]:
        """Namespaces whose log has rollings the consumer has not processed."""
        ...

    def record_consumer_failure(
        self, consumer: str, namespace: str, *, durable: bool, error: str, at: int
    ) -> None: ...

    def consumer_status(self, namespace: str) -> list[ConsumerStatus]: ...


@runtime_checkable
class MemoryStore(UnitStore, WindowStore, LogStore, Protocol):
    """The core every backend implements."""

    def close(self) -> None: ...
