"""An OpenAI Agents SDK `Session` kept in partner-memory.

    from partner_memory.integrations.openai_agents import PartnerMemorySession
    session = PartnerMemorySession("user-7", db="memory.db")
    result = await Runner.run(agent, "Where am I travelling?", session=session)

The session id is the namespace. Each item the runner adds is a message of
the window (its text for summaries and recall; the item itself, exact, in
the message's metadata), so the items survive restarts and processes, and
once the window rolls, `get_items` starts with the namespace's context (the
rolled summary, what recall found) as a system item before the items not
rolled yet. The session cannot see a run's new input, so recall for it goes
where the SDK merges history and input, `RunConfig.session_input_callback`:

    config = RunConfig(session_input_callback=session.recall_input)
    result = await Runner.run(agent, "What is my dentist called?", session=session,
                              run_config=config)

puts what recall finds for the input that the items do not hold (`k`, 5) as a
system item before it, never stored. `pop_item` forgets the newest item;
`clear_session` forgets the namespace. What it does not do: read items back out of rolled units (the
summary stands for them), or store the SDK's compaction snapshots.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from agents.items import TResponseInputItem
from agents.memory import SessionABC, SessionSettings
from agents.memory.session_settings import coerce_session_settings, resolve_session_limit

from partner_memory.integrations.binding import BoundAdapter, Memory
from partner_memory.model import Message, Role

#: Where a message keeps the SDK item it was made from (when its text alone cannot).
ITEM_KEY = "openai_item"
_ROLES: dict[str, Role] = {"user": "user", "assistant": "assistant", "system": "system"}


class PartnerMemorySession(BoundAdapter, SessionABC):
    """`agents.memory.Session` over one partner-memory namespace."""

    def __init__(
        self,
        session_id: str,
        *,
        db: str | Path | None = None,
        memory: Memory | None = None,
        context: bool = True,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        k: int = 5,
    ) -> None:
        """`session_settings` as `SQLiteSession` takes them: a `SessionSettings`, a dict
        of its fields (an unknown one is a TypeError), or None for the defaults; `k`: the
        messages `recall_input` adds at the most."""
        self.session_id = session_id
        self.k = k
        self._given: set[str] = set()  # what recall_input added, so add_items skips it
        self.session_settings = (
            SessionSettings()
            if session_settings is None
            else coerce_session_settings(dict(session_settings))
            if isinstance(session_settings, Mapping)
            else coerce_session_settings(session_settings)
        )
        self._closed = False
        self._bind(session_id, db=db, memory=memory, context=context)

    def _open(self) -> None:
        """A closed session refuses every call, as `SQLiteSession` does."""
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} {self.session_id!r} is closed")

    def close(self) -> None:
        """Close the service opened from `db` (one handed in stays open); the session
        refuses calls afterwards."""
        self._closed = True
        super().close()

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The context (once something rolled), then the window's items; the newest
        `limit` of them, as stored (the runner drops a tool output whose call is left
        out, as it does for the SDK's own sessions)."""
        self._open()
        limit = resolve_session_limit(limit, self.session_settings)
        return await asyncio.to_thread(self._items, limit)

    def _items(self, limit: int | None) -> list[TResponseInputItem]:
        items = [item_of(m) for m in self._binding.window()]
        context = self._context_xml()
        if context:
            items.insert(0, cast("TResponseInputItem", {"role": "system", "content": context}))
        if limit is not None:
            items = items[-limit:] if limit > 0 else []
        return items

    async def recall_input(
        self, history: list[TResponseInputItem], new_input: list[TResponseInputItem]
    ) -> list[TResponseInputItem]:
        """A `session_input_callback`: the history, then what recall finds for the new
        input's user text that the window does not hold (as a system item, which the
        runner hands back to `add_items` and which is not stored), then the input."""
        self._open()
        asked = "\n".join(
            _text(dict(cast("Mapping[str, Any]", i)))
            for i in new_input
            if isinstance(i, Mapping) and i.get("role") == "user"
        ).strip()
        if not asked or not self.k:
            return [*history, *new_input]

        def recalled() -> str:
            seen = {m.id for m in self._binding.window()}
            return self._binding.recalled(asked, k=self.k, seen=seen)

        found = await asyncio.to_thread(recalled)
        if not found:
            return [*history, *new_input]
        self._given.add(found)
        given = cast("TResponseInputItem", {"role": "system", "content": found})
        return [*history, given, *new_input]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        self._open()
        kept = [item for item in items if not self._recalled(item)]
        messages = [message_of(item) for item in kept]
        await asyncio.to_thread(self._binding.record, messages)

    def _recalled(self, item: TResponseInputItem) -> bool:
        """Whether `item` is what `recall_input` added (the runner stores it as input)."""
        if not isinstance(item, Mapping) or item.get("role") != "system":
            return False
        content = item.get("content")
        if isinstance(content, str) and content in self._given:
            self._given.discard(content)
            return True
        return False

    async def pop_item(self) -> TResponseInputItem | None:
        """Forget the newest item of the window and return it (None: the window is empty)."""
        self._open()

        def pop() -> TResponseInputItem | None:
            window = self._binding.window()
            if not window:
                return None
            self._binding.forget([window[-1].id])
            return item_of(window[-1])

        return await asyncio.to_thread(pop)

    async def clear_session(self) -> None:
        """Forget the namespace: window, units, slices and context."""
        self._open()
        await asyncio.to_thread(self._binding.forget_all)


def message_of(item: Any) -> Message:
    """An SDK item as a message: its text, and the item itself when the text alone
    would not give it back."""
    dump = getattr(item, "model_dump", None)  # the SDK hands dicts, a caller may a model
    data: dict[str, Any] = dump(exclude_unset=True) if callable(dump) else dict(item)
    role = _ROLES.get(str(data.get("role")), "system" if data.get("role") else "assistant")
    content = data.get("content")
    plain = set(data) <= {"role", "content"} and isinstance(content, str) and role == data["role"]
    return Message(role, _text(data), metadata={} if plain else {ITEM_KEY: data})


def item_of(message: Message) -> TResponseInputItem:
    """The item a message was made from."""
    kept = message.metadata.get(ITEM_KEY)
    if isinstance(kept, dict):
        return cast("TResponseInputItem", kept)
    return cast("TResponseInputItem", {"role": message.role, "content": message.text})


def _text(data: Mapping[str, Any]) -> str:
    """What an item says, as a person would read it in a transcript."""
    kind = data.get("type")
    content = data.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = [p.get("text") or p.get("refusal") for p in content if isinstance(p, Mapping)]
        return "\n".join(str(p) for p in parts if p)
    if kind == "function_call":
        return f"called {data.get('name')}({data.get('arguments', '')})"
    if kind == "function_call_output":
        output = data.get("output")
        return f"tool result: {output if isinstance(output, str) else json.dumps(output)}"
    if kind == "reasoning":
        summary = data.get("summary") or []
        return "\n".join(str(s.get("text", "")) for s in summary if isinstance(s, Mapping))
    return json.dumps(data, ensure_ascii=False, default=str)
