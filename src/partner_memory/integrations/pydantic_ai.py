"""Pydantic AI: an agent capability that keeps the conversation in partner-memory.

    from partner_memory.integrations.pydantic_ai import partner_memory_history
    agent = Agent(model, capabilities=[partner_memory_history("user-7", db="memory.db")])
    result = await agent.run("Where am I travelling?")

The first argument (the user or conversation) is the namespace. Before a run
it reads the window back (each message exactly as the run made it, kept in
the message's metadata) and asks recall about the run's prompt; each model
request is sent the namespace's context (once something rolled: the summary)
and what recall found that the window does not hold (`k`, 5 by default; 0:
none) as a system prompt, then that history, then the run's own messages; after the run, its new
messages are recorded. What it does not do: give back the messages of rolled
units (the summary stands for them), or merge a `message_history` the caller
passes with the stored one (pass one or the other). Pydantic AI has no verb
for forgetting a conversation: `clear()` (or `aclear()`) on the capability
forgets its namespace.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import RunContext

from partner_memory.integrations.binding import BoundAdapter, Memory
from partner_memory.model import Message, Role

#: Where a message keeps the Pydantic AI message it was made from.
MESSAGE_KEY = "pydantic_ai_message"


@dataclasses.dataclass
class PartnerMemoryHistory(BoundAdapter, AbstractCapability[Any]):
    """Reads a namespace's window into each run and records what the run added."""

    namespace: str
    db: str | Path | None = None
    memory: Memory | None = None
    context: bool = True
    #: The messages recall adds for the run's prompt at the most (0: none).
    k: int = 5
    _history: list[ModelMessage] = dataclasses.field(default_factory=list, repr=False)
    _context: str = ""

    def __post_init__(self) -> None:
        self._bind(self.namespace, db=self.db, memory=self.memory, context=self.context)

    async def for_run(self, ctx: RunContext[Any]) -> PartnerMemoryHistory:
        # what one run read is its own (a capability is shared by the agent's runs); the
        # copy shares the binding, so no service is opened per run
        run = copy.copy(self)
        run._history, run._context = [], ""
        return run

    async def before_run(self, ctx: RunContext[Any]) -> None:
        asked = _prompt_text(ctx.prompt)

        def read() -> tuple[list[ModelMessage], str]:
            window = self._binding.window()
            seen = {m.id for m in window}
            recalled = self._binding.recalled(asked, k=self.k, seen=seen) if self.k else ""
            known = "\n".join(part for part in (self._context_xml(), recalled) if part)
            return [model_message(m) for m in window], known

        history, self._context = await asyncio.to_thread(read)
        self._history = _from_a_prompt(history)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        shown: list[ModelMessage] = []
        if self._context:
            shown.append(ModelRequest(parts=[SystemPromptPart(self._context)]))
        request_context.messages = [*shown, *self._history, *request_context.messages]
        return request_context

    async def after_run(
        self, ctx: RunContext[Any], *, result: AgentRunResult[Any]
    ) -> AgentRunResult[Any]:
        messages = [message_of(m) for m in result.new_messages()]
        await asyncio.to_thread(self._binding.record, messages)
        return result

    def clear(self) -> None:
        """Forget the conversation: the namespace's window, units, slices and context."""
        self._binding.forget_all()

    async def aclear(self) -> None:
        """`clear`, off the event loop."""
        await asyncio.to_thread(self._binding.forget_all)


def partner_memory_history(
    namespace: str,
    *,
    db: str | Path | None = None,
    memory: Memory | None = None,
    context: bool = True,
    k: int = 5,
) -> PartnerMemoryHistory:
    """The capability for one user or conversation (`namespace`), from a database or over
    a `MemoryService` / `MemoryClient` it leaves open; `k`: the messages recall adds for
    each run's prompt at the most (0: none)."""
    return PartnerMemoryHistory(namespace, db=db, memory=memory, context=context, k=k)


def _prompt_text(prompt: Any) -> str:
    """What a run's prompt says (its text parts), as recall is asked it."""
    if isinstance(prompt, str):
        return prompt
    return " ".join(p for p in prompt or () if isinstance(p, str))


def message_of(message: ModelMessage) -> Message:
    """A Pydantic AI message as a partner-memory message: what it says, and itself."""
    kept = ModelMessagesTypeAdapter.dump_python([message], mode="json")[0]
    role: Role = "assistant" if isinstance(message, ModelResponse) else "user"
    return Message(role, _text(message), metadata={MESSAGE_KEY: kept})


def model_message(message: Message) -> ModelMessage:
    """The Pydantic AI message a partner-memory message was made from (or, for one
    recorded otherwise, its text as a prompt or a reply)."""
    kept = message.metadata.get(MESSAGE_KEY)
    if isinstance(kept, dict):
        return ModelMessagesTypeAdapter.validate_python([kept])[0]
    if message.role == "assistant":
        return ModelResponse(parts=[TextPart(message.text)])
    return ModelRequest(parts=[UserPromptPart(message.text)])


def _text(message: ModelMessage) -> str:
    said = []
    for part in message.parts:
        content = getattr(part, "content", None)
        if isinstance(content, str):
            said.append(content)
        elif getattr(part, "part_kind", "") == "tool-call":
            said.append(f"called {part.tool_name}({part.args_as_json_str()})")  # type: ignore[union-attr]
        elif content is not None:
            said.append(str(content))
    return "\n".join(said)


def _from_a_prompt(history: Sequence[ModelMessage]) -> list[ModelMessage]:
    """The history from its first user prompt: what rolling cut off before it (a tool's
    return without its call) is left out, as a model refuses it."""
    for i, message in enumerate(history):
        if isinstance(message, ModelRequest) and any(
            isinstance(p, UserPromptPart) for p in message.parts
        ):
            return list(history[i:])
    return []
