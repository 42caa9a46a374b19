"""What an importer reads out of another system: per namespace, a transcript to replay
and the blocks to hold in context; and the pieces the readers share (stable ids,
tool calls kept beside the reply that followed them)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from partner_memory import json_text
from partner_memory.clip import clipped
from partner_memory.errors import InvalidInputError
from partner_memory.held_blocks import HeldBlock
from partner_memory.ingest import Transcript
from partner_memory.ingest.transcripts import stable_id
from partner_memory.model import Message, Role, check_namespace

#: A tool call's arguments or output is kept up to this many characters.
TOOL_TEXT_CHARS = 2_000
#: A table name as a reader puts it in SQL: a plain identifier, optionally schema-qualified.
_TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")


@dataclass(frozen=True, slots=True)
class Imported:
    """One namespace's share of a source: its messages in order, the blocks it holds,
    and how many of the source's items were left out (system prompts, tool traffic
    with no reply after it, events)."""

    namespace: str
    transcript: Transcript
    blocks: tuple[HeldBlock, ...] = ()
    skipped: int = 0


def message_id(kind: str, session: str, key: object, role: str, content: str) -> str:
    """A stable id for an imported message: equal for the same row of the same session
    with the same text, so importing again stores nothing twice, and different
    wherever the text differs, so two sources never claim one id."""
    return stable_id(f"{kind}\x1f{session}\x1f{key}\x1f{role}\x1f{content}", "message content")


def checked_table(name: str) -> str:
    if not _TABLE.match(name):
        raise InvalidInputError(f"table {name!r}: a table name is letters, digits and _")
    return name


def text_of(content: Any) -> str:
    """The text of a message's content: a string, or the text of its parts (OpenAI's
    input_text/output_text/text parts, LangChain's and Letta's text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif (
                isinstance(part, dict)
                and isinstance(part.get("text"), str)
                and part.get("type", "text") in ("text", "input_text", "output_text")
            ):
                texts.append(part["text"])
        return "\n".join(t for t in texts if t)
    return ""


@dataclass(slots=True)
class Conversation:
    """A transcript being read: messages in order, tool calls held until the assistant
    message that follows them, which keeps them in its metadata (`tool_calls`)."""

    kind: str
    session: str
    messages: list[Message] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    skipped: int = 0
    _calls: dict[str, dict[str, str]] = field(default_factory=dict)
    _unnamed: int = 0

    def add(
        self,
        role: Role,
        text: str,
        *,
        key: object,
        origin: str,
        timestamp: int | None,
    ) -> None:
        """A message; a blank one is counted as skipped (a tool call's empty reply text)."""
        if not text.strip():
            self.skipped += 1
            return
        extra: dict[str, Any] = {}
        if role == "assistant" and self._calls:
            extra["tool_calls"] = list(self._calls.values())
            self._calls.clear()
        self.messages.append(
            Message(
                role,
                text,
                id=message_id(self.kind, self.session, key, role, text),
                timestamp=timestamp,
                metadata=extra,
            )
        )
        self.origins.append(origin)

    def call(self, call_id: str | None, name: str, arguments: Any) -> None:
        """A tool call the assistant made; kept with the next assistant message."""
        if call_id is None:
            self._unnamed += 1
            call_id = f"\x00{self._unnamed}"
        self._calls[call_id] = {"name": str(name), "arguments": _tool_text(arguments)}

    def output(self, call_id: str | None, output: Any) -> None:
        """A tool's output, beside its call (an output without a call starts one)."""
        held = self._calls.setdefault(call_id or "", {"name": ""})
        held["output"] = _tool_text(output)

    def done(self, namespace: str, name: str) -> Imported:
        """The conversation as read; tool calls no reply followed are left out."""
        self.skipped += len(self._calls)
        self._calls.clear()
        transcript = Transcript(name, self.kind, self.messages, self.origins)
        return Imported(check_namespace(namespace), transcript, skipped=self.skipped)


#: Reads one row's JSON value into its session's conversation: (conversation, value,
#: the row's key, its origin for errors, its time in ms or None).
RowReader = Callable[[Conversation, Any, object, str, "int | None"], None]


def sessions_of(
    kind: str, rows: Iterable[Sequence[Any]], *, where: str, field: str, read: RowReader
) -> list[Conversation]:
    """Rows of (id, session id, JSON text, time) in order, as one conversation per
    session, in the order of their first rows."""
    sessions: dict[str, Conversation] = {}
    for row_id, session, data, at in rows:
        conversation = sessions.get(str(session))
        if conversation is None:
            conversation = sessions[str(session)] = Conversation(kind, str(session))
        origin = f"{where} row {row_id}"
        try:
            value = json_text.loads(data)
        except (ValueError, TypeError):
            raise InvalidInputError(f"{origin}: {field} is not JSON") from None
        read(conversation, value, row_id, origin, at)
    return list(sessions.values())


def finished(
    conversations: Iterable[Conversation], namespace: str | None, where: str
) -> list[Imported]:
    """Each conversation in its session's namespace (or all in `namespace`)."""
    return [c.done(namespace or c.session, f"{where} session {c.session}") for c in conversations]


def _tool_text(value: Any) -> str:
    text = value if isinstance(value, str) else text_of(value) or repr(value)
    return clipped(text, TOOL_TEXT_CHARS)
