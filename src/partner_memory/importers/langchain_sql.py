"""LangChain `SQLChatMessageHistory` tables: each session id a namespace.

The history keeps one row per message (`message_store`: id, session_id, message
as `message_to_dict` JSON: {"type": "human" | "ai" | "system" | "tool" | ...,
"data": {...}}). Human, AI and system messages become user, assistant and
system messages; an AI message's tool calls and the tool messages answering
them are kept in the metadata of the next AI message with text. The table has no
times: the messages are stored at the time of the import, in their order.

The source is SQLAlchemy's URL of the database (`sqlite:///history.db`,
`postgresql://...`) or a SQLite file's path.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from partner_memory.errors import ConfigurationError, InvalidInputError, StorageUnavailableError
from partner_memory.importers.source import (
    Conversation,
    Imported,
    checked_table,
    finished,
    sessions_of,
    text_of,
)
from partner_memory.importers.sqlite_source import has_table, opened
from partner_memory.model import Role

KIND = "langchain-sql"
TABLE = "message_store"
_ROLES: dict[str, Role] = {"human": "user", "ai": "assistant", "system": "system"}
_CHAT_ROLES: dict[str, Role] = {"user": "user", "human": "user", "assistant": "assistant"}


def read(source: str, *, table: str | None = None, namespace: str | None = None) -> list[Imported]:
    """Every session of the table, in the order of their first message."""
    table = checked_table(table or TABLE)
    scheme = urlsplit(source).scheme.lower()
    if scheme.startswith("postgres"):
        rows = _postgres_rows(source, table)
    elif scheme in ("", "sqlite") or len(scheme) == 1:  # a path (C: on Windows) or sqlite:///
        rows = _sqlite_rows(_sqlite_path(source), table)
    else:
        raise InvalidInputError(
            f"{source!r}: a LangChain history is read from sqlite:///PATH,"
            " postgresql://... or a SQLite file's path"
        )
    read_rows = sessions_of(KIND, rows, where=table, field="message", read=_read_message)
    return finished(read_rows, namespace, table)


def _sqlite_path(source: str) -> str:
    if source.lower().startswith("sqlite:"):
        path = source.split(":", 1)[1]
        if not path.startswith("///"):
            raise InvalidInputError(f"{source!r}: a SQLite URL is sqlite:///PATH")
        return path[3:]
    return source


def _sqlite_rows(path: str, table: str) -> list[tuple[Any, ...]]:
    with opened(path) as connection:
        if not has_table(connection, table.rsplit(".", maxsplit=1)[-1]):
            raise InvalidInputError(f"{path}: no table {table!r} (--table names another)")
        return connection.execute(
            f"SELECT id, session_id, message, NULL FROM {table} ORDER BY id"
        ).fetchall()


def _postgres_rows(url: str, table: str) -> list[tuple[Any, ...]]:
    try:
        import psycopg
    except ImportError:
        raise ConfigurationError(
            "reading PostgreSQL needs psycopg: pip install 'partner-memory[postgres]'"
        ) from None
    conninfo = url.replace("postgresql+psycopg://", "postgresql://", 1)
    conninfo = conninfo.replace("postgresql+psycopg2://", "postgresql://", 1)
    try:
        with psycopg.connect(conninfo, autocommit=True) as connection:
            found = connection.execute("SELECT to_regclass(%s)", (table,)).fetchone()
            if found is None or found[0] is None:
                raise InvalidInputError(f"no table {table!r} in that database (--table)")
            return connection.execute(
                f"SELECT id, session_id, message, NULL FROM {table} ORDER BY id"
            ).fetchall()
    except psycopg.OperationalError as exc:
        raise StorageUnavailableError(f"cannot read the history: {exc}") from None


def _read_message(
    conversation: Conversation, message: Any, key: object, origin: str, at: int | None
) -> None:
    if not isinstance(message, dict) or not isinstance(message.get("data"), dict):
        raise InvalidInputError(f"{origin}: not a LangChain message ({{'type', 'data'}})")
    kind, data = str(message.get("type", "")), message["data"]
    text = text_of(data.get("content"))
    if kind == "ai":
        for call in data.get("tool_calls") or []:
            if isinstance(call, dict):
                conversation.call(call.get("id"), call.get("name", ""), call.get("args", ""))
    if kind in ("tool", "function"):
        conversation.output(data.get("tool_call_id") or data.get("name"), data.get("content"))
        return
    role = _ROLES.get(kind) or (_CHAT_ROLES.get(str(data.get("role"))) if kind == "chat" else None)
    if role is None:
        conversation.skipped += 1
        return
    conversation.add(role, text, key=key, origin=origin, timestamp=at)
