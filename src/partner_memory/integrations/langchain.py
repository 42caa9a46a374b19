"""A LangChain `BaseChatMessageHistory` kept in partner-memory.

    from partner_memory.integrations.langchain import PartnerMemoryChatHistory
    service = MemoryService.open("memory.db")  # one per process, shared by the histories
    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: PartnerMemoryChatHistory(session_id, memory=service),
        input_messages_key="question", history_messages_key="history",
    )

(A history built with `db=` opens a service of its own: `close()` it.)

The session id is the namespace. Each message added is a message of the
window (its text for summaries and recall; the LangChain message itself,
exact, in the metadata when its text alone would not give it back: tool
calls, names, ids); once the window rolls, `messages` starts with the
namespace's context (the rolled summary, what recall found) as a
`SystemMessage`. `clear` forgets the namespace. What it does not do: give
back the messages of rolled units (the summary stands for them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    message_to_dict,
    messages_from_dict,
)

from partner_memory.integrations.binding import BoundAdapter, Memory
from partner_memory.model import Message, Role

#: Where a message keeps the LangChain message it was made from (when its text alone cannot).
MESSAGE_KEY = "langchain_message"
_PLAIN: dict[type[BaseMessage], Role] = {
    HumanMessage: "user",
    AIMessage: "assistant",
    SystemMessage: "system",
}
_OF_ROLE: dict[str, type[BaseMessage]] = {role: kind for kind, role in _PLAIN.items()}


class PartnerMemoryChatHistory(BoundAdapter, BaseChatMessageHistory):
    """`BaseChatMessageHistory` over one partner-memory namespace."""

    def __init__(
        self,
        session_id: str,
        *,
        db: str | Path | None = None,
        memory: Memory | None = None,
        context: bool = True,
    ) -> None:
        self.session_id = session_id
        self._bind(session_id, db=db, memory=memory, context=context)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The context (once something rolled), then the window's messages."""
        found = [langchain_message(m) for m in self._binding.window()]
        context = self._context_xml()
        return ([SystemMessage(context)] if context else []) + found

    async def aget_messages(self) -> list[BaseMessage]:
        return await asyncio.to_thread(lambda: self.messages)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        self._binding.record([message_of(m) for m in messages])

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        await asyncio.to_thread(self.add_messages, messages)

    def clear(self) -> None:
        """Forget the namespace: window, units, slices and context."""
        self._binding.forget_all()

    async def aclear(self) -> None:
        await asyncio.to_thread(self.clear)


def message_of(message: BaseMessage) -> Message:
    """A LangChain message as a partner-memory message."""
    role = _PLAIN.get(type(message))
    plain = role is not None and isinstance(message.content, str) and not _extra(message)
    metadata = {} if plain else {MESSAGE_KEY: message_to_dict(message)}
    return Message(role or "assistant", str(message.text), metadata=metadata)


def langchain_message(message: Message) -> BaseMessage:
    """The LangChain message a partner-memory message was made from."""
    kept = message.metadata.get(MESSAGE_KEY)
    if isinstance(kept, dict):
        return messages_from_dict([kept])[0]
    return _OF_ROLE[message.role](message.text)


def _extra(message: BaseMessage) -> dict[str, Any]:
    """What a message holds beyond its type and text (that a plain copy would lose)."""
    data = message.model_dump(exclude_defaults=True)
    data.pop("content", None)
    data.pop("type", None)
    return data
