"""OpenAI Agents SDK `SQLiteSession` databases: each session a namespace.

The SDK keeps a session's items in order in one table (`agent_messages`:
session_id, message_data as JSON, created_at). Messages (user, assistant,
system; developer read as system) become messages with their text; a function
call and its output are kept in the metadata of the assistant message that
follows them (`tool_calls`: name, arguments, output). Reasoning, hosted tools'
calls and other item types are left out and counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from partner_memory.errors import InvalidInputError
from partner_memory.importers.source import (
    Conversation,
    Imported,
    checked_table,
    finished,
    sessions_of,
    text_of,
)
from partner_memory.importers.sqlite_source import has_table, opened, sqlite_time
from partner_memory.model import Role

KIND = "openai-agents-sqlite"
MESSAGES_TABLE = "agent_messages"
_ROLES: dict[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
}


def read(path: str, *, table: str | None = None, namespace: str | None = None) -> list[Imported]:
    """Every session of the database, oldest first; `namespace` puts them all in one."""
    table = checked_table(table or MESSAGES_TABLE)
    with opened(path) as connection:
        if not has_table(connection, table):
            raise InvalidInputError(
                f"{path}: no table {table!r} (an OpenAI Agents SQLiteSession database keeps"
                f" its items in {MESSAGES_TABLE!r}; --table names another)"
            )
        rows = connection.execute(
            f"SELECT id, session_id, message_data, created_at FROM {table} ORDER BY id"
        ).fetchall()
    where = f"{path} {table}"
    read_rows = sessions_of(KIND, _timed(rows), where=where, field="message_data", read=_read_item)
    return finished(read_rows, namespace, path)


def _timed(rows: list[Any]) -> Iterator[tuple[Any, Any, Any, int | None]]:
    for row_id, session, data, created in rows:
        yield row_id, session, data, sqlite_time(created)


def _read_item(
    conversation: Conversation, item: Any, key: object, origin: str, at: int | None
) -> None:
    if not isinstance(item, dict):
        raise InvalidInputError(f"{origin}: an item is a JSON object")
    kind = item.get("type", "message")
    if kind == "message" and "role" in item:
        role = _ROLES.get(str(item["role"]))
        if role is None:
            conversation.skipped += 1
            return
        conversation.add(role, text_of(item.get("content")), key=key, origin=origin, timestamp=at)
    elif kind == "function_call":
        conversation.call(item.get("call_id"), item.get("name", ""), item.get("arguments", ""))
    elif kind == "function_call_output":
        conversation.output(item.get("call_id"), item.get("output", ""))
    else:  # reasoning, hosted tools, images: not conversation text
        conversation.skipped += 1
