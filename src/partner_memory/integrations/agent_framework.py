"""Microsoft Agent Framework: providers whose sessions live in partner-memory.

    from partner_memory.integrations.agent_framework import PartnerMemoryHistoryProvider
    agent = Agent(client, context_providers=[PartnerMemoryHistoryProvider(db="memory.db")])
    session = agent.create_session(session_id="user-7")
    await agent.run("Where am I travelling?", session=session)

An `AgentSession`'s id is the namespace. `PartnerMemoryHistoryProvider`
gives the agent, before a run, the namespace's context (once something
rolled: the summary, what recall found) as a system message, then the
window's messages, each exactly as the framework made it (kept in the
message's metadata), and as instructions what recall finds for the run's
input that the window does not hold (`k`, 5 by default; 0: none); after the
run the framework's base class stores the inputs and the response through
`save_messages`, which records only what memory does not hold yet (as the
framework's own in-memory provider does): a caller that sends the whole
conversation again each turn stores each message once. `clear(session_id)` forgets a session.
`PartnerMemoryContextProvider` instead adds, as instructions, the context and
what recall finds for the run's input (so a long memory is asked, not
replayed), and records the turn unless a history provider does. What they do
not do: give back the messages of rolled units (the summary stands for them),
or serve a run without a session id.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_framework import AgentSession, ContextProvider, HistoryProvider, SessionContext
from agent_framework import Message as FrameworkMessage

from partner_memory.errors import InvalidInputError
from partner_memory.integrations.binding import Memory, NamespaceBinding, NamespaceBindings
from partner_memory.model import Message, Role

#: Where a message keeps the framework's message it was made from.
MESSAGE_KEY = "agent_framework_message"
_ROLES: dict[str, Role] = {"user": "user", "assistant": "assistant", "system": "system"}


class _Sessions(NamespaceBindings):
    """A provider's sessions: each session id a namespace."""

    def _binding(self, session_id: str | None) -> NamespaceBinding:
        if not session_id:
            raise InvalidInputError(
                f"{type(self).__name__} keeps sessions by id: run the agent with"
                " session=agent.create_session(session_id=...)"
            )
        return self._bound(session_id)

    async def clear(self, session_id: str | None) -> None:
        """Forget the session: its namespace's window, units, slices and context."""
        await asyncio.to_thread(lambda: self._binding(session_id).forget_all())


class PartnerMemoryHistoryProvider(_Sessions, HistoryProvider):
    """Each `AgentSession` (by its id) is a partner-memory namespace, replayed."""

    def __init__(
        self,
        *,
        db: str | Path | None = None,
        memory: Memory | None = None,
        context: bool = True,
        k: int = 5,
        source_id: str = "partner_memory",
        **options: Any,
    ) -> None:
        """`k`: the messages recall adds for the run's input at the most (0: none);
        `options` are `HistoryProvider`'s (`load_messages`, `store_inputs`, ...)."""
        HistoryProvider.__init__(self, source_id, **options)
        self.context, self.k = context, k
        self._open(db, memory)

    async def before_run(
        self,
        *,
        agent: Any,
        session: AgentSession,
        context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        """The history (`get_messages`), then, as instructions, what recall finds for the
        input that the history does not hold (what rolled away, or was never replayed)."""
        await super().before_run(agent=agent, session=session, context=context, state=state)
        asked = _asked(context)
        if not self.k or not asked:
            return

        def recalled() -> str:
            binding = self._binding(context.session_id)
            seen = {m.id for m in binding.window()}
            return binding.recalled(asked, k=self.k, seen=seen)

        found = await asyncio.to_thread(recalled)
        if found:
            context.extend_instructions(self.source_id, f"What you remember:\n{found}")

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
        """Record what memory does not hold yet: the messages after the part of
        `messages` that repeats the window (a whole conversation sent again), and
        never one whose framework id memory holds or forgot."""

        def save() -> None:
            binding = self._binding(session_id)
            held = [framework_message(m) for m in binding.window()]
            binding.record_new([message_of(m) for m in new_messages(held, messages)])

        await asyncio.to_thread(save)


class PartnerMemoryContextProvider(_Sessions, ContextProvider):
    """Each `AgentSession` (by its id) is a namespace, asked: before a run, its context
    and what recall finds for the input become instructions; after it, the turn is
    recorded (`record=False` when a history provider records it)."""

    def __init__(
        self,
        *,
        db: str | Path | None = None,
        memory: Memory | None = None,
        k: int = 5,
        record: bool = True,
        source_id: str = "partner_memory_context",
    ) -> None:
        ContextProvider.__init__(self, source_id)
        self.k, self.record = k, record
        self._open(db, memory)

    async def before_run(
        self,
        *,
        agent: Any,
        session: AgentSession,
        context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        asked = _asked(context)
        binding = self._binding(context.session_id)
        known = await asyncio.to_thread(binding.remembered, asked, k=self.k)
        if known:
            context.extend_instructions(self.source_id, f"What you remember:\n{known}")

    async def after_run(
        self,
        *,
        agent: Any,
        session: AgentSession,
        context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        if not self.record:
            return
        said = list(context.input_messages)
        if context.response is not None:
            said += context.response.messages
        recorded = [message_of(m) for m in said]
        await asyncio.to_thread(lambda: self._binding(context.session_id).record(recorded))


def _asked(context: SessionContext) -> str:
    """What the run's input says, as recall is asked it."""
    return "\n".join(m.text for m in context.input_messages if m.text).strip()


def message_of(message: FrameworkMessage) -> Message:
    """A framework message as a partner-memory message: what it says, and itself (under
    its framework id, if it has one, so it is never recorded twice)."""
    role = _ROLES.get(str(message.role), "assistant")  # a tool's result reads as the agent's
    metadata = {MESSAGE_KEY: message.to_dict()}
    if message.message_id:
        return Message(role, message.text or "", id=message.message_id, metadata=metadata)
    return Message(role, message.text or "", metadata=metadata)


def _identity(message: FrameworkMessage) -> tuple[str, ...]:
    if message.message_id:
        return ("id", message.message_id)
    contents = json.dumps([c.to_dict() for c in message.contents], sort_keys=True, default=str)
    return ("content", str(message.role), contents)


def new_messages(
    held: Sequence[FrameworkMessage], incoming: Sequence[FrameworkMessage]
) -> list[FrameworkMessage]:
    """What `incoming` adds to `held` (the newest messages memory holds): what follows
    `held` inside it (a whole conversation sent again), else what follows the longest
    end of `held` it starts with. A message is itself by its id, else by its role and
    contents; one repeated user message without an id is a new turn ("yes" twice)."""
    if not held:
        return list(incoming)
    known = [_identity(m) for m in held]
    said = [_identity(m) for m in incoming]

    def repeated_input(overlap: int) -> bool:
        return overlap == 1 and str(held[-1].role) == "user" and known[-1][0] != "id"

    for start in range(len(said) - len(known) + 1):
        if said[start : start + len(known)] == known and not (
            start == 0 and len(known) == 1 and repeated_input(1)
        ):
            return list(incoming[start + len(known) :])
    for overlap in range(min(len(known), len(said)), 0, -1):
        if known[-overlap:] == said[:overlap] and not repeated_input(overlap):
            return list(incoming[overlap:])
    return list(incoming)


def framework_message(message: Message) -> FrameworkMessage:
    """The framework message a partner-memory message was made from (or its text)."""
    kept = message.metadata.get(MESSAGE_KEY)
    if isinstance(kept, dict):
        return FrameworkMessage.from_dict(kept)
    return FrameworkMessage(message.role, [message.text])
