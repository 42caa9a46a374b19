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

A history is read before the new input, so what recall finds for the input
comes through LangChain's place for it, a retriever: `history.retriever()`
(or `PartnerMemoryRetriever(session_id, memory=service)`) gives the `k` (5)
messages recall finds that the window does not hold, as documents, and
`recalled_text(documents)` lists them for a prompt:

    def chain_for(history):
        found = itemgetter("question") | history.retriever() | recalled_text
        return RunnablePassthrough.assign(recalled=found) | prompt | model
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.documents import Document
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.retrievers import BaseRetriever
from pydantic import PrivateAttr

from partner_memory.integrations.binding import BoundAdapter, Memory, NamespaceBinding
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

    def retriever(self, k: int = 5) -> PartnerMemoryRetriever:
        """What recall finds in this history's namespace for a query, skipping the
        window (`messages` holds it), on the history's own memory."""
        return PartnerMemoryRetriever.over(self._binding, k=k)


class PartnerMemoryRetriever(BaseRetriever):
    """The `k` messages recall finds in one namespace for a query, best first, as
    documents (text cut to a bound; the message's id, role, speaker, time and unit in
    the metadata), leaving out the window's (`skip_window`: a history shows them)."""

    namespace: str
    k: int = 5
    skip_window: bool = True
    _binding: NamespaceBinding = PrivateAttr()

    def __init__(
        self,
        namespace: str,
        *,
        db: str | Path | None = None,
        memory: Memory | None = None,
        **fields: Any,
    ) -> None:
        super().__init__(**{**fields, "namespace": namespace})
        self._binding = NamespaceBinding(namespace, db=db, memory=memory)

    @classmethod
    def over(cls, binding: NamespaceBinding, *, k: int) -> PartnerMemoryRetriever:
        """A retriever on a binding an adapter holds (it closes nothing)."""
        made = cls.model_construct(namespace=binding.namespace, k=k, skip_window=True)
        made._binding = binding
        return made

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        binding = self._binding
        seen = {m.id for m in binding.window()} if self.skip_window else set()
        return [
            Document(
                text,
                metadata={
                    "id": m.id,
                    "role": m.role,
                    "speaker": m.speaker,
                    "timestamp": m.timestamp,
                },
            )
            for m, text in binding.recalled_messages(query, k=self.k, seen=seen)
        ]

    def close(self) -> None:
        """Close the service opened from `db` (one handed in stays open)."""
        self._binding.close()


def recalled_text(documents: Sequence[Document]) -> str:
    """A retriever's documents as one `<recalled_messages>` list for a prompt ("" if
    none): each line who said it and what."""
    lines = [
        f"- {d.metadata.get('speaker') or d.metadata.get('role')}: {d.page_content}"
        for d in documents
    ]
    return "<recalled_messages>\n" + "\n".join(lines) + "\n</recalled_messages>" if lines else ""


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
