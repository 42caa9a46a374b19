"""Where an adapter's conversation lives: one namespace, embedded or remote.

An adapter is built from a database URL (it opens, and closes, a service of
its own), from a `MemoryService` it is handed, or from a `MemoryClient` of a
remote `serve`; it owns only what it opened. The framework's scope (a
session id, a thread id) names the namespace, so two scopes never share a
window, a unit or a context.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from pathlib import Path

from partner_memory.client import MemoryClient
from partner_memory.clip import clipped
from partner_memory.errors import ConflictError, InvalidInputError, NotFoundError
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


class _Owner:
    """What opened its memory closes it; what was handed one leaves it open."""

    _memory: Memory
    _owned: bool

    def close(self) -> None:
        """Close the service opened from `db` (one handed in stays open)."""
        if self._owned:
            self._memory.close()


class NamespaceBinding(_Owner):
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

    def record_new(self, messages: Sequence[Message]) -> int:
        """Record those of `messages` (by id) memory neither holds nor forgot, so a
        framework handing a whole conversation again records only what it added;
        how many were recorded. A message another process recorded meanwhile is
        skipped, not refused."""
        held = self._held([m.id for m in messages])
        fresh = [m for m in messages if m.id not in held]
        try:
            self.record(fresh)
        except ConflictError:  # someone recorded part of it meanwhile: one at a time
            recorded = 0
            for message in fresh:
                try:
                    self.record([message])
                except ConflictError:
                    continue
                recorded += 1
            return recorded
        return len(fresh)

    def _held(self, ids: Sequence[str]) -> set[str]:
        """Which of `ids` memory holds (window, units) or forgot; a remote memory can
        tell only its window, and refuses (ConflictError) what its units hold."""
        handle = self._handle()
        held = {m.id for m in self.window()}
        return held | handle.core.known_ids(ids) if isinstance(handle, PartnerMemory) else held

    def window(self) -> list[Message]:
        """What is not rolled yet, oldest first."""
        try:
            return [w.message for w in self._handle().window()]
        except NotFoundError:  # a remote namespace nothing was recorded in yet
            return []

    def forget(self, message_ids: Sequence[str]) -> int:
        return self._handle().forget_messages(message_ids) if message_ids else 0

    def forget_slice(self, unit_id: str, slice_id: str) -> int:
        return self._handle().forget_slice(unit_id, slice_id)

    def forget_all(self) -> None:
        self._handle().forget_all()

    def context_xml(self) -> str:
        """The namespace's context (the rolled summary, what recall found); "" if none."""
        try:
            return self._handle().context_xml()
        except NotFoundError:
            return ""

    def recall(self, query: str, *, k: int, activate: bool = True) -> RecallResult:
        """What the namespace holds that best matches `query` (none yet: no hits); with
        `activate`, what was found goes into the namespace's context."""
        try:
            return self._handle().recall(query, k=k, activate=activate)
        except NotFoundError:
            return RecallResult(query=query, hits=[], slices=[])

    def remembered(self, asked: str, *, k: int, window: bool = False) -> str:
        """What an agent is told it remembers, as one text: the namespace's context, the
        window's messages (with `window`: for a framework that keeps no copy of what it
        handed over), and what recall finds for `asked` (`recalled`); "" if none."""
        held = self.window() if window else []
        parts = [
            self.context_xml(),
            _listed("earlier_messages", held),
            self.recalled(asked, k=k, seen={m.id for m in held}),
        ]
        return "\n".join(part for part in parts if part)

    def recalled(self, asked: str, *, k: int, seen: Collection[str] = ()) -> str:
        """`recalled_messages` as one `<recalled_messages>` text; "" if none."""
        return _listed("recalled_messages", self.recalled_messages(asked, k=k, seen=seen))

    def recalled_messages(
        self, asked: str, *, k: int, seen: Collection[str] = ()
    ) -> list[tuple[Message, str]]:
        """The `k` messages recall finds for `asked` (a user's latest input) that the
        model is not shown already (`seen`, by id), best first, each with its text as
        shown: cut to `RECALLED_MESSAGE_CHARS`, and no more than `RECALLED_CHARS` in all."""
        found = self.recall(asked, k=k, activate=False).hits if asked.strip() else []
        shown: list[tuple[Message, str]] = []
        used = 0
        for message in (h.message for h in found if h.message.id not in seen):
            text = clipped(message.text, RECALLED_MESSAGE_CHARS)
            if shown and used + len(text) > RECALLED_CHARS:
                break
            shown.append((message, text))
            used += len(text)
        return shown


#: What recall adds to a model's input at the most, in characters of text, and of one
#: message: the hits are a few lines beside the conversation, not a second transcript.
RECALLED_CHARS, RECALLED_MESSAGE_CHARS = 3000, 600


def _listed(tag: str, messages: Sequence[Message] | Sequence[tuple[Message, str]]) -> str:
    pairs = [m if isinstance(m, tuple) else (m, m.text) for m in messages]
    said = "\n".join(f"- {m.speaker or m.role}: {text}" for m, text in pairs)
    return f"<{tag}>\n{said}\n</{tag}>" if said else ""


class NamespaceBindings(_Owner):
    """An adapter serving many scopes: each scope's namespace bound on one memory
    (opened from `db` and closed with the adapter, or handed in and left open)."""

    def _open(self, db: str | Path | None, memory: Memory | None) -> None:
        self._memory, self._owned = opened(db, memory)
        self._bindings: dict[str, NamespaceBinding] = {}
        self._lock = threading.Lock()

    def _bound(self, namespace: str) -> NamespaceBinding:
        with self._lock:
            found = self._bindings.get(namespace)
            if found is None:
                found = self._bindings[namespace] = NamespaceBinding(namespace, memory=self._memory)
            return found


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
