"""Verbs of the core contract made from its others, for a backend to inherit.

A new backend implements fewer verbs by inheriting `DerivedVerbs`: each verb
here is exactly what its protocol says, built from the essential ones (the
in-memory backend inherits them all). A backend with a cheaper way - one
query instead of a read of more than is asked - overrides it, as the SQL
backends do; `partner_memory.testing` holds either to the same behaviour.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from partner_memory.errors import NotFoundError
from partner_memory.model import (
    ConsumerStatus,
    ContextState,
    MemorySlice,
    Message,
    NamespaceInfo,
    UnitInfo,
    WindowActivity,
)

#: More units than any namespace holds: "all of them" for `list_units`.
_ALL = 2**62


class DerivedVerbs(ABC):
    """`read_messages`, `get_slice`, `stored_message_ids`, `count_units`, `recent_slices`,
    `trajectory_length`, `unit_ids`, `unit_ids_starting`, `count_namespaces`,
    `idle_candidates` and `lagging_namespaces` from the verbs below them."""

    # -- what they are made from -----------------------------------------------------

    @abstractmethod
    def get_namespace(self, namespace: str) -> NamespaceInfo | None: ...

    @abstractmethod
    def list_units(
        self,
        namespace: str,
        *,
        limit: int,
        offset: int = 0,
        since: int | None = None,
        until: int | None = None,
        after: str | None = None,
        oldest_first: bool = False,
    ) -> list[UnitInfo]: ...

    @abstractmethod
    def read_excerpts(
        self, namespace: str, ranges: Sequence[tuple[str, int, int]]
    ) -> list[tuple[list[Message], list[MemorySlice]]]: ...

    @abstractmethod
    def read_slices(self, namespace: str, unit_id: str) -> list[MemorySlice]: ...

    @abstractmethod
    def find_messages(self, namespace: str, message_ids: Sequence[str]) -> dict[str, Message]: ...

    @abstractmethod
    def context_state(self, namespace: str, *, slices: int) -> ContextState: ...

    @abstractmethod
    def window_activity(self, namespace: str) -> WindowActivity: ...

    @abstractmethod
    def list_namespaces(
        self, *, limit: int | None = None, after: str | None = None, matching: str | None = None
    ) -> list[NamespaceInfo]: ...

    @abstractmethod
    def log_head(self, namespace: str) -> int: ...

    @abstractmethod
    def consumer_status(self, namespace: str) -> list[ConsumerStatus]: ...

    # -- what they give ----------------------------------------------------------------

    def read_messages(self, namespace: str, unit_id: str, start: int, end: int) -> list[Message]:
        return self.read_excerpts(namespace, [(unit_id, start, end)])[0][0]

    def get_slice(self, namespace: str, unit_id: str, slice_id: str) -> MemorySlice | None:
        return next((s for s in self.read_slices(namespace, unit_id) if s.id == slice_id), None)

    def stored_message_ids(self, namespace: str, message_ids: Sequence[str]) -> set[str]:
        return set(self.find_messages(namespace, message_ids))

    def count_units(
        self, namespace: str, *, since: int | None = None, until: int | None = None
    ) -> int:
        if since is None and until is None:
            info = self.get_namespace(namespace)
            if info is None:
                raise NotFoundError(f"namespace {namespace!r} not found")
            return info.unit_count
        return len(self.list_units(namespace, limit=_ALL, since=since, until=until))

    def recent_slices(self, namespace: str, limit: int) -> list[tuple[str, MemorySlice]]:
        return self.context_state(namespace, slices=limit).slices

    def trajectory_length(self, namespace: str) -> int:
        return self.window_activity(namespace).length

    def unit_ids(self, namespace: str) -> list[str]:
        return [u.id for u in self.list_units(namespace, limit=_ALL, oldest_first=True)]

    def unit_ids_starting(self, namespace: str, prefix: str, *, limit: int) -> list[str]:
        return sorted(u for u in self.unit_ids(namespace) if u.startswith(prefix))[:limit]

    def count_namespaces(self, *, matching: str | None = None) -> int:
        return len(self.list_namespaces(matching=matching))

    def idle_candidates(self, before: int, among: Sequence[str]) -> list[str]:
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

    def lagging_namespaces(self, consumer: str, *, limit: int = 1000) -> list[str]:
        lagging = []
        for info in self.list_namespaces():
            at = {c.name: c.position for c in self.consumer_status(info.name)}.get(consumer, 0)
            if self.log_head(info.name) > at:
                lagging.append(info.name)
                if len(lagging) >= limit:
                    break
        return lagging
