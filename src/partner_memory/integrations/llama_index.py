"""LlamaIndex: a memory block of `Memory` kept in partner-memory.

    from llama_index.core.memory import Memory
    from partner_memory.integrations.llama_index import PartnerMemoryBlock
    memory = Memory.from_defaults(
        session_id="chat-1", memory_blocks=[PartnerMemoryBlock("user-7", db="memory.db")]
    )
    response = await agent.run("Where am I travelling?", memory=memory)

The first argument (the user) is the namespace; the `Memory`'s own session id
is kept in each message's metadata. What `Memory` flushes from its short-term
queue is recorded, so it rolls into units and summaries like any
conversation. Each time `Memory` is read, the block gives what the queue let
go of: the namespace's context (once something rolled: the summary), the
flushed messages not rolled yet, and what recall finds for the latest user
message. Under a token limit it drops what recall found first, then the
flushed messages. What it does not do: keep `Memory`'s short-term queue (that
is `Memory`'s own chat store: give it a file, `async_database_uri=`, to keep
it across restarts), or record messages without text (tool calls).
`Memory.reset()` empties only that queue; `block.reset()` (or `areset()`)
forgets what partner-memory holds of the namespace.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.memory.memory import BaseMemoryBlock

from partner_memory.integrations.binding import Memory, NamespaceBinding
from partner_memory.model import Message, Role

#: Where a message names the `Memory` session it was flushed from.
SESSION_KEY = "llama_index_session_id"
_ROLES: dict[str, Role] = {"user": "user", "system": "system", "developer": "system"}
#: What `atruncate` drops, first to last.
_DROPPED_FIRST = ("<recalled_messages>", "<earlier_messages>")


class PartnerMemoryBlock(BaseMemoryBlock[str]):
    """A `Memory` block over one partner-memory namespace: records what the queue
    flushes, and gives back the context, the flushed messages and recall's hits."""

    name: str = Field(default="partner_memory", description="The block's name in the prompt.")
    description: str | None = Field(
        default="What partner-memory keeps of earlier conversation.",
        description="A description of the memory block.",
    )
    namespace: str = Field(description="The partner-memory namespace (the user).")
    k: int = Field(default=5, ge=1, description="Messages recall adds at most.")
    _binding: NamespaceBinding = PrivateAttr()

    def __init__(
        self,
        namespace: str,
        *,
        db: str | Path | None = None,
        memory: Memory | None = None,
        **fields: Any,
    ) -> None:
        """`fields` are the block's (`name`, `priority`, `k`, ...)."""
        super().__init__(**{**fields, "namespace": namespace})
        self._binding = NamespaceBinding(namespace, db=db, memory=memory)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        asked = next(
            (m.content or "" for m in reversed(messages or []) if m.role == MessageRole.USER), ""
        )
        return await asyncio.to_thread(self._binding.remembered, asked, k=self.k, window=True)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        said = [message_of(m) for m in messages]
        recorded = [m for m in said if m is not None]
        await asyncio.to_thread(self._binding.record, recorded)

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """Drop recall's hits, then the flushed messages, until about
        `tokens_to_truncate` (counted as words) are gone; the context stays."""
        left = content
        for tag in _DROPPED_FIRST:
            if len(content.split()) - len(left.split()) >= tokens_to_truncate:
                break
            at = left.find(tag)
            if at >= 0:
                left = left[:at].rstrip("\n")
        return left or None

    def reset(self) -> None:
        """Forget the namespace: window, units, slices and context (`Memory.reset()`
        empties only `Memory`'s own queue)."""
        self._binding.forget_all()

    async def areset(self) -> None:
        """`reset`, off the event loop."""
        await asyncio.to_thread(self._binding.forget_all)

    def close(self) -> None:
        """Close the service opened from `db` (one handed in stays open)."""
        self._binding.close()


def message_of(message: ChatMessage) -> Message | None:
    """A LlamaIndex chat message as a partner-memory message (None: it has no text)."""
    text = message.content or ""
    if not text.strip():
        return None
    role = _ROLES.get(str(message.role.value), "assistant")  # a tool's result reads as the agent's
    session_id = message.additional_kwargs.get("session_id")
    metadata = {SESSION_KEY: session_id} if isinstance(session_id, str) else {}
    return Message(role, text, metadata=metadata)
