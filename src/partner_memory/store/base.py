"""The store contract: the few verbs a backend implements.

Everything richer (sessions, paging, slice-to-message reads, import/export)
is built once on top of these in `MemoryCore` and `interop`, never per backend.
Each verb is one transaction; `append` and `write_units` are all-or-nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from partner_memory.model import (
    MemorySlice,
    Message,
    NamespaceInfo,
    RollingRecord,
    RollingTotals,
    TrajectoryState,
    UnitInfo,
    UnitUpdate,
)


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


@runtime_checkable
class MemoryStore(Protocol):
    """Durable, namespaced storage of memory units; implemented by each backend."""

    @property
    def url(self) -> str:
        """Where the store lives, safe to print (no password)."""
        ...

    def ensure_namespace(self, namespace: str, session_id: str) -> NamespaceInfo:
        """Get a namespace, creating it with `session_id` when it does not exist."""
        ...

    def get_namespace(self, namespace: str) -> NamespaceInfo | None: ...

    def list_namespaces(self) -> list[NamespaceInfo]: ...

    def set_session(self, namespace: str, session_id: str) -> None:
        """Make `session_id` the namespace's current memory session."""
        ...

    def append(
        self,
        namespace: str,
        messages: Sequence[Message],
        summary: str,
        *,
        slice_id: str,
        timestamp: int,
        summarizer: str | None = None,
    ) -> UnitUpdate:
        """R5 in one transaction: get-or-create the current session's unit and extend it."""
        ...

    def write_units(
        self,
        namespace: str,
        session_id: str,
        units: Sequence[UnitWrite],
        *,
        trajectory: Sequence[Message] | None = None,
    ) -> None:
        """Create or extend many units, set the session and (if given) replace the
        trajectory, all or nothing."""
        ...

    def get_unit(self, namespace: str, unit_id: str) -> UnitInfo | None: ...

    def list_units(
        self,
        namespace: str,
        *,
        limit: int,
        offset: int = 0,
        since: int | None = None,
        until: int | None = None,
    ) -> list[UnitInfo]:
        """Units newest first; `since` inclusive and `until` exclusive, in ms."""
        ...

    def count_units(
        self, namespace: str, *, since: int | None = None, until: int | None = None
    ) -> int: ...

    def unit_ids(self, namespace: str) -> list[str]:
        """Every unit id of a namespace in creation order (the reference's unit set)."""
        ...

    def read_messages(self, namespace: str, unit_id: str, start: int, end: int) -> list[Message]:
        """Messages at positions [start, end) of a unit, in order."""
        ...

    def read_slices(self, namespace: str, unit_id: str) -> list[MemorySlice]:
        """A unit's slices ordered by timestamp (R2)."""
        ...

    def get_slice(self, namespace: str, unit_id: str, slice_id: str) -> MemorySlice | None: ...

    # -- what the rolling pipeline keeps ----------------------------------------

    def load_trajectory(self, namespace: str) -> TrajectoryState:
        """The persisted conversation window, oldest first (R9)."""
        ...

    def append_trajectory(
        self, namespace: str, messages: Sequence[Message], *, last_interaction: int | None
    ) -> None:
        """Append to the window; message ids are unique per namespace's window."""
        ...

    def remove_trajectory(self, namespace: str, message_ids: Sequence[str]) -> None: ...

    def stored_message_ids(self, namespace: str, message_ids: Sequence[str]) -> set[str]:
        """Which of these ids are already stored in one of the namespace's units."""
        ...

    def recent_slices(self, namespace: str, limit: int) -> list[tuple[str, MemorySlice]]:
        """The newest slices of the namespace as (unit id, slice), newest first."""
        ...

    def record_rolling(self, namespace: str, record: RollingRecord) -> None: ...

    def rolling_totals(self, namespace: str) -> RollingTotals: ...

    def close(self) -> None: ...
