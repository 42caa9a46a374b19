"""The read side the interfaces show: listings and figures, never a write.

Listings may be answered by a read replica (`store.contract.reads`); `namespace`,
which callers decide from, is always read from the primary.

The CLI, the HTTP routes and the inspector read what they list through this
module (or through a handle), not through the store's verbs, so a new page
or route never grows the backend contract. A figure that needs an optional
capability (`InspectionStore`, `ForgetStore`) names it when the backend
lacks it.
"""

from __future__ import annotations

from partner_memory.model import (
    LogEntry,
    NamespaceInfo,
    NamespaceOverview,
    RollingRecord,
    check_limit,
)
from partner_memory.store.contract.base import MemoryStore
from partner_memory.store.contract.capabilities import (
    FORGETTING,
    INSPECTION,
    RECORDS,
    NamespaceQuery,
    RecordQuery,
    StoredRecord,
    require,
)
from partner_memory.store.contract.reads import replica_may_answer


class MemoryQueries:
    """Read-only queries over one store, for the interfaces."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def namespace(self, name: str) -> NamespaceInfo | None:
        """A namespace, or None if it does not exist."""
        return self._store.get_namespace(name)

    def namespaces(
        self, *, limit: int, after: str | None = None, matching: str | None = None
    ) -> list[NamespaceInfo]:
        """Namespaces by name, `limit` after the name `after`; `matching` a key's glob."""
        with replica_may_answer():
            return self._store.list_namespaces(
                limit=check_limit(limit), after=after, matching=matching
            )

    def count_namespaces(self, *, matching: str | None = None) -> int:
        with replica_may_answer():
            return self._store.count_namespaces(matching=matching)

    def overviews(self, query: NamespaceQuery) -> list[NamespaceOverview]:
        """Namespaces with their figures (`InspectionStore`)."""
        with replica_may_answer():
            return require(self._store, INSPECTION).namespace_overviews(query)

    def rolling_history(
        self, namespace: str, *, limit: int, before: int | None = None
    ) -> list[RollingRecord]:
        """Rollings newest first with their cost (`InspectionStore`)."""
        with replica_may_answer():
            return require(self._store, INSPECTION).rolling_history(
                namespace, limit=check_limit(limit), before=before
            )

    def log(self, namespace: str, after: int, *, limit: int) -> list[LogEntry]:
        """The rolling log after the sequence number `after`, oldest first."""
        with replica_may_answer():
            return self._store.read_log(namespace, after, limit=check_limit(limit))

    def forget_log(self, namespace: str, *, limit: int = 100) -> list[tuple[str, str, int]]:
        """(kind, target, at) of the namespace's forgets, newest first (`ForgetStore`)."""
        with replica_may_answer():
            return require(self._store, FORGETTING).forget_log(namespace, limit=check_limit(limit))

    def records(self, namespace: str, query: RecordQuery) -> list[StoredRecord]:
        """A durable consumer's records in a namespace, by key."""
        with replica_may_answer():
            return require(self._store, RECORDS).read_records(namespace, query)
