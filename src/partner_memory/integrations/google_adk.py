"""A Google ADK `BaseMemoryService` kept in partner-memory.

    from google.adk.tools import preload_memory
    from partner_memory.integrations.google_adk import PartnerMemoryService
    memory_service = PartnerMemoryService(db="memory.db")
    runner = Runner(agent=agent, app_name="travel", session_service=sessions,
                    memory_service=memory_service)

An (app name, user id) pair is a namespace (`namespace_of`), so two users, or
one user of two apps, never share memory; each event is a message whose id is
the event's id, whose speaker is the event's author, and whose metadata names
its ADK session. `add_session_to_memory` may hand the same session many times:
only the events memory does not hold yet are recorded, and a deleted one is
never recorded again. `search_memory` is recall kept to what matches, as ADK's
own services do: the messages recall ranks that share a word with the query,
best first, then the summaries of the slices holding them, with the
namespace's context (once something rolled) before them; a query nothing
matches returns nothing, so `preload_memory` puts no noise in the prompt.
`delete_memory` forgets the message (or the slice) with that id;
`forget_user` forgets all of one user's memory at once. What it does
not do: record events without text (tool calls and results, thoughts), or a
session's state and artifacts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from google.adk.events.event import Event
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session
from google.genai import types

from partner_memory.errors import InvalidInputError, NotFoundError
from partner_memory.integrations.binding import Memory, NamespaceBinding, NamespaceBindings
from partner_memory.model import Message, Role
from partner_memory.recall.analyze import terms
from partner_memory.recall.results import RecallResult

#: Where a message names the ADK session its event came from.
SESSION_KEY = "adk_session_id"
#: Where a message keeps the `custom_metadata` it was added with.
METADATA_KEY = "adk_custom_metadata"
#: The author of what memory itself says (the context, a slice's summary).
MEMORY_AUTHOR = "memory"
_SLICE = "slice:"


def namespace_of(app_name: str, user_id: str) -> str:
    """The namespace of one user of one app: both parts escaped, so no two pairs meet."""
    for name, value in (("app_name", app_name), ("user_id", user_id)):
        if not isinstance(value, str) or not value:
            raise InvalidInputError(f"{name} must be a non-empty string, got {value!r}")
    return f"{quote(app_name, safe='')}/{quote(user_id, safe='')}"


class PartnerMemoryService(NamespaceBindings, BaseMemoryService):
    """ADK's memory service over partner-memory namespaces, one per app and user."""

    def __init__(
        self,
        *,
        db: str | Path | None = None,
        memory: Memory | None = None,
        k: int = 10,
        context: bool = True,
    ) -> None:
        """`k` messages a search returns at most; `context` puts the namespace's
        context (its rolled summary) first in what a search returns."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidInputError(f"k must be a positive integer, got {k!r}")
        self.k, self.context = k, context
        self._open(db, memory)

    def _user(self, app_name: str, user_id: str) -> NamespaceBinding:
        return self._bound(namespace_of(app_name, user_id))

    async def add_session_to_memory(self, session: Session) -> None:
        """Record the session's events memory does not hold yet (and never deleted)."""
        await self.add_events_to_memory(
            app_name=session.app_name,
            user_id=session.user_id,
            events=session.events,
            session_id=session.id,
        )

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Record these events (a delta: the ones memory already holds are skipped)."""
        said = [message_of(e, session_id, custom_metadata) for e in events]
        messages = [m for m in said if m is not None]
        binding = self._user(app_name, user_id)
        await asyncio.to_thread(binding.record_new, messages)

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Record each entry as a message of the user's memory (its id kept, if it has one)."""
        messages = [entry_message(m, custom_metadata) for m in memories]
        binding = self._user(app_name, user_id)
        await asyncio.to_thread(binding.record_new, [m for m in messages if m is not None])

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        """What recall finds for `query` that shares a word with it, then the slices
        holding it, after the context; nothing when nothing matches."""
        binding = self._user(app_name, user_id)

        def search() -> list[MemoryEntry]:
            if not query.strip():
                return []
            found = matching(binding.recall(query, k=self.k, activate=False))
            if not found.hits:
                return []
            context = binding.context_xml() if self.context else ""
            return ([_said_by_memory(context)] if context else []) + _entries(found)

        return SearchMemoryResponse(memories=await asyncio.to_thread(search))

    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> None:
        """Forget the message (or slice) a search returned with this id; an id memory
        does not hold is nothing to delete."""
        if memory_id:
            await self.delete_memories(app_name=app_name, user_id=user_id, memory_ids=[memory_id])

    async def delete_memories(
        self, *, app_name: str, user_id: str, memory_ids: Sequence[str]
    ) -> int:
        """Forget these messages and slices (ids as a search returned them) in one forget
        of the messages and one per slice; ids memory does not hold are skipped. How
        many messages and slices were forgotten."""
        binding = self._user(app_name, user_id)
        slices = [i for i in memory_ids if i.startswith(_SLICE)]
        messages = [i for i in dict.fromkeys(memory_ids) if i and not i.startswith(_SLICE)]

        def forget() -> int:
            try:
                forgotten = binding.forget(messages)
            except NotFoundError:  # none of them is held
                forgotten = 0
            for memory_id in dict.fromkeys(slices):
                unit_id, _, slice_id = memory_id.removeprefix(_SLICE).partition(":")
                try:
                    binding.forget_slice(unit_id, slice_id)
                except NotFoundError:
                    continue
                forgotten += 1
            return forgotten

        return await asyncio.to_thread(forget)

    async def forget_user(self, *, app_name: str, user_id: str) -> None:
        """Forget everything one user of one app said (the namespace: window, units,
        slices, context), as the `clear` verb ADK's memory services lack."""
        await asyncio.to_thread(self._user(app_name, user_id).forget_all)


def matching(found: RecallResult) -> RecallResult:
    """`found` kept to the messages that share a word (an index term: stemmed, stop
    words left out, Chinese segmented) with its query, and the slices holding them.
    Recall also ranks a message's neighbours and near meanings; a memory service is
    asked what matches, and its answer goes into the prompt whole."""
    asked = set(terms(found.query))
    hits = [h for h in found.hits if asked.intersection(terms(h.message.text))]
    held = {(h.unit_id, h.position) for h in hits}
    slices = [
        s
        for s in found.slices
        if any(
            unit == s.unit_id
            and position is not None
            and s.slice.start_index <= position < s.slice.end_index
            for unit, position in held
        )
    ]
    return replace(found, hits=hits, slices=slices)


def message_of(
    event: Event, session_id: str | None, custom_metadata: Mapping[str, object] | None = None
) -> Message | None:
    """An event as a message (None: it says nothing in text)."""
    text = _text(event.content)
    if not text:
        return None
    user = event.author == "user" or (event.content is not None and event.content.role == "user")
    metadata: dict[str, Any] = {"speaker": event.author}
    if session_id:
        metadata[SESSION_KEY] = session_id
    if custom_metadata:
        metadata[METADATA_KEY] = dict(custom_metadata)
    return Message(
        "user" if user else "assistant",
        text,
        id=event.id,
        timestamp=round(event.timestamp * 1000),
        metadata=metadata,
    )


def entry_message(
    entry: MemoryEntry, custom_metadata: Mapping[str, object] | None = None
) -> Message | None:
    """A memory entry written directly, as a message (None: it has no text)."""
    text = _text(entry.content)
    if not text:
        return None
    metadata: dict[str, Any] = {**entry.custom_metadata, **(custom_metadata or {})}
    if entry.author:
        metadata["speaker"] = entry.author
    timestamp = _ms(entry.timestamp) if entry.timestamp else None
    role: Role = "user" if entry.content.role == "user" else "assistant"
    if entry.id:
        return Message(role, text, id=entry.id, timestamp=timestamp, metadata=metadata)
    return Message(role, text, timestamp=timestamp, metadata=metadata)


def _text(content: types.Content | None) -> str:
    parts = content.parts if content is not None and content.parts else []
    return "\n".join(p.text for p in parts if p.text and not p.thought).strip()


def _ms(iso: str) -> int:
    try:
        moment = datetime.fromisoformat(iso)
    except ValueError as error:
        raise InvalidInputError(f"memory timestamp must be ISO 8601, got {iso!r}") from error
    return round((moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp() * 1000)


def _iso(ms: int | None) -> str | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def _said_by_memory(text: str, **entry: Any) -> MemoryEntry:
    content = types.Content(role="model", parts=[types.Part.from_text(text=text)])
    return MemoryEntry(content=content, author=MEMORY_AUTHOR, **entry)


def _entries(found: RecallResult | None) -> list[MemoryEntry]:
    """Recall's hits as memory entries (their ids delete them), then their slices."""
    if found is None:
        return []
    entries = []
    for hit in found.hits:
        message = hit.message
        role = "user" if message.role == "user" else "model"
        entries.append(
            MemoryEntry(
                id=message.id,
                content=types.Content(role=role, parts=[types.Part.from_text(text=message.text)]),
                author=message.speaker or message.role,
                timestamp=_iso(message.timestamp),
                custom_metadata={k: v for k, v in message.metadata.items() if k != "speaker"},
            )
        )
    for held in found.slices:
        entries.append(
            _said_by_memory(
                held.slice.summary,
                id=f"{_SLICE}{held.unit_id}:{held.slice.id}",
                timestamp=_iso(held.slice.timestamp),
                custom_metadata={"unit_id": held.unit_id, "slice_id": held.slice.id},
            )
        )
    return entries
