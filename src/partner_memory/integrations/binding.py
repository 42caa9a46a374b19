"""Where an adapter's conversation lives: one namespace, embedded or remote.

An adapter is built from a database URL (it opens, and closes, a service of
its own), from a `MemoryService` it is handed, or from a `MemoryClient` of a
remote `serve`; it owns only what it opened. The framework's scope (a
session id, a thread id) names the namespace, so two scopes never share a
window, a unit or a context.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from partner_memory.client import MemoryClient
from partner_memory.errors import InvalidInputError, NotFoundError
from partner_memory.memory import PartnerMemory
from partner_memory.model import Message
from partner_memory.recall.results import RecallResult
from partner_memory.service import MemoryService

Memory = MemoryService | MemoryClient


def opened(db: str | Path | None, memory: Memory | None) -> tuple[Memory, bool]:
    """The memory an adapter works on, and whether the adapter opened it (so closes it):
    a service of its own from `db` (or PARTNER_MEMORY_DB), or the one handed in."""
    if db is not None and memory is not None:
        raise InvalidInputError("give a database (db=) or a memory (memory=), not both")
    if memory is None:
        return MemoryService.open(db), True
    if not isinstance(memory, MemoryService | MemoryClient):
        raise InvalidInputError(
            f"memory must be a MemoryService or a MemoryClient, got {type(memory).__name__}"
        )
    return memory, False


class NamespaceBinding:
    """The calls an adapter makes, the same on a service's handle and on a client."""

    def __init__(
        self, namespace: str, *, db: str | Path | None = None, memory: Memory | None = None
    ) -> None:
        if isinstance(memory, MemoryClient) and memory.namespace != namespace:
            raise InvalidInputError(
                f"the MemoryClient is bound to namespace {memory.namespace!r}, not"
                f" {namespace!r}: pass MemoryClient(url, {namespace!r})"
            )
        self.namespace = namespace
        self._memory, self._owned = opened(db, memory)
        self._handle()  # a bad namespace is refused here, not at the first turn

    def _handle(self) -> PartnerMemory | MemoryClient:
        # asked each time: a forgotten namespace's handle is replaced by the service
        memory = self._memory
        return memory.memory(self.namespace) if isinstance(memory, MemoryService) else memory

    def record(self, messages: Sequence[Message]) -> None:
        if messages:
            self._handle().record_messages(messages)

    def window(self) -> list[Message]:
        """What is not rolled yet, oldest first."""
        try:
            return [w.message for w in self._handle().window()]
        except NotFoundError:  # a remote namespace nothing was recorded in yet
            return []

    def forget(self, message_ids: Sequence[str]) -> int:
        return self._handle().forget_messages(message_ids) if message_ids else 0

    def forget_all(self) -> None:
        self._handle().forget_all()

    def context_xml(self) -> str:
        """The namespace's context (the rolled summary, what recall found); "" if none."""
        try:
            return self._handle().context_xml()
        except NotFoundError:
            return ""

    def recall(self, query: str, *, k: int) -> RecallResult:
        """What the namespace holds that best matches `query` (none yet: no hits)."""
        try:
            return self._handle().recall(query, k=k)
        except NotFoundError:
            return RecallResult(query=query, hits=[], slices=[])

    def close(self) -> None:
        """Close what this binding opened; what it was handed stays open."""
        if self._owned:
            self._memory.close()


class BoundAdapter:
    """What every adapter keeps: its scope's namespace, and whether the framework is
    shown the namespace's context."""

    _binding: NamespaceBinding
    context: bool

    def _bind(
        self, namespace: str, *, db: str | Path | None, memory: Memory | None, context: bool
    ) -> None:
        self.context = context
        self._binding = NamespaceBinding(namespace, db=db, memory=memory)

    def _context_xml(self) -> str:
        return self._binding.context_xml() if self.context else ""

    def close(self) -> None:
        """Close the service opened from `db` (one handed in stays open)."""
        self._binding.close()
