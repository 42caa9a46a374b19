"""Microsoft Agent Framework: a `HistoryProvider` whose sessions live in partner-memory.

    from partner_memory.integrations.agent_framework import PartnerMemoryHistoryProvider
    agent = Agent(client, context_providers=[PartnerMemoryHistoryProvider(db="memory.db")])
    session = agent.create_session(session_id="user-7")
    await agent.run("Where am I travelling?", session=session)

An `AgentSession`'s id is the namespace. Before a run the provider gives the
agent the namespace's context (once something rolled: the summary, what
recall found) as a system message, then the window's messages, each exactly
as the framework made it (kept in the message's metadata); after the run,
the framework's base class stores the inputs and the response through
`save_messages`. What it does not do: give back the messages of rolled units
(the summary stands for them), or serve a run without a session id.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_framework import HistoryProvider
from agent_framework import Message as FrameworkMessage

from partner_memory.errors import InvalidInputError
from partner_memory.integrations.binding import Memory, NamespaceBinding
from partner_memory.model import Message, Role
from partner_memory.service import MemoryService

#: Where a message keeps the framework's message it was made from.
MESSAGE_KEY = "agent_framework_message"
_ROLES: dict[str, Role] = {"user": "user", "assistant": "assistant", "system": "system"}


class PartnerMemoryHistoryProvider(HistoryProvider):
    """Each `AgentSession` (by its id) is a partner-memory namespace."""

    def __init__(
        self,
        *,
        db: str | Path | None = None,
        memory: Memory | None = None,
        context: bool = True,
        source_id: str = "partner_memory",
        **options: Any,
    ) -> None:
        """`options` are `HistoryProvider`'s (`load_messages`, `store_inputs`, ...)."""
        super().__init__(source_id, **options)
        if db is not None and memory is not None:
            raise InvalidInputError("give a database (db=) or a memory (memory=), not both")
        self.context = context
        self._owned = memory is None
        self._memory: Memory = MemoryService.open(db) if memory is None else memory
        self._bindings: dict[str, NamespaceBinding] = {}
        self._lock = threading.Lock()

    def _binding(self, session_id: str | None) -> NamespaceBinding:
        if not session_id:
            raise InvalidInputError(
                "PartnerMemoryHistoryProvider keeps sessions by id: run the agent with"
                " session=agent.create_session(session_id=...)"
            )
        with self._lock:
            found = self._bindings.get(session_id)
            if found is None:
                found = self._bindings[session_id] = NamespaceBinding(
                    session_id, memory=self._memory
                )
            return found

    async def get_messages(
        self, session_id: str | None, *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[FrameworkMessage]:
        """The context (once something rolled), then the window's messages."""

        def read() -> list[FrameworkMessage]:
            binding = self._binding(session_id)
            found = [framework_message(m) for m in binding.window()]
            context = binding.context_xml() if self.context else ""
            return ([FrameworkMessage("system", [context])] if context else []) + found

        return await asyncio.to_thread(read)

    async def save_messages(
        self,
        session_id: str | None,
        messages: Sequence[FrameworkMessage],
        *,
        state: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        recorded = [message_of(m) for m in messages]
        await asyncio.to_thread(lambda: self._binding(session_id).record(recorded))

    def close(self) -> None:
        """Close the service opened from `db` (one handed in stays open)."""
        if self._owned:
            self._memory.close()


def message_of(message: FrameworkMessage) -> Message:
    """A framework message as a partner-memory message: what it says, and itself."""
    role = _ROLES.get(str(message.role), "assistant")  # a tool's result reads as the agent's
    return Message(role, message.text or "", metadata={MESSAGE_KEY: message.to_dict()})


def framework_message(message: Message) -> FrameworkMessage:
    """The framework message a partner-memory message was made from (or its text)."""
    kept = message.metadata.get(MESSAGE_KEY)
    if isinstance(kept, dict):
        return FrameworkMessage.from_dict(kept)
    return FrameworkMessage(message.role, [message.text])
