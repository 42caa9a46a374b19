"""What every group of shared SQL verbs builds on: the backend hooks and helpers.

A backend supplies connections, transactions, schema locking and the
translation of its driver's errors. Queries use `?` placeholders; a backend
whose driver wants another style rewrites them in `_sql`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from partner_memory.errors import NotFoundError
from partner_memory.model import MemorySlice, Message, UnitInfo, dump_metadata, load_metadata

MESSAGE_COLUMNS = "message_id, role, content, timestamp, metadata"
SLICE_COLUMNS = "slice_id, start_index, end_index, summary, timestamp, summarizer"
#: Rows per INSERT: 7 parameters each stays below SQLite's 32,766-parameter limit.
ROWS_PER_INSERT = 500


class Cursor(Protocol):
    """The part of a DB-API cursor the shared queries use."""

    def execute(self, query: Any, params: Sequence[Any] = ..., /) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


def unit_from_row(row: Sequence[Any]) -> UnitInfo:
    return UnitInfo(id=row[0], timestamp=row[1], message_count=row[2], slice_count=row[3])


def slice_from_row(row: Sequence[Any]) -> MemorySlice:
    return MemorySlice(
        id=row[0],
        start_index=row[1],
        end_index=row[2],
        summary=row[3],
        timestamp=row[4],
        summarizer=row[5],
    )


def message_from_row(row: Sequence[Any]) -> Message:
    return Message(
        id=row[0], role=row[1], content=row[2], timestamp=row[3], metadata=load_metadata(row[4])
    )


def message_params(message: Message) -> tuple[Any, ...]:
    """A message as the values of MESSAGE_COLUMNS."""
    metadata = dump_metadata(message.metadata) if message.metadata else None
    return (message.id, message.role, message.content, message.timestamp, metadata)


def values_clause(rows: int, columns: int) -> str:
    """`(?, ?), (?, ?)` for a multi-row INSERT."""
    return ", ".join(["(" + ", ".join(["?"] * columns) + ")"] * rows)


class SqlBase(ABC):
    """Connection hooks a backend provides, and the helpers every query group shares."""

    #: Appended to the namespace read that starts a write, to lock that row.
    lock_clause = ""
    #: Column type of an auto-numbered primary key.
    serial_type = "INTEGER PRIMARY KEY"

    # -- what a backend provides -------------------------------------------------

    @abstractmethod
    def _transaction(self, *, write: bool) -> AbstractContextManager[Cursor]:
        """A cursor inside one transaction, committed on success, driver errors translated."""

    @abstractmethod
    def _lock_schema(self, cur: Cursor) -> None:
        """Serialise concurrent migrations of one database."""

    def _sql(self, query: str) -> str:
        return query

    # -- helpers -----------------------------------------------------------------

    def _run(self, cur: Cursor, query: str, params: Sequence[Any] = ()) -> Cursor:
        cur.execute(self._sql(query), params)
        return cur

    def _namespace_id(self, cur: Cursor, namespace: str, *, lock: bool = False) -> int:
        query = "SELECT id FROM namespaces WHERE name = ?" + (self.lock_clause if lock else "")
        row = self._run(cur, query, (namespace,)).fetchone()
        if row is None:
            raise NotFoundError(f"namespace {namespace!r} not found")
        return int(row[0])

    def _unit_pk(self, cur: Cursor, namespace: str, unit_id: str) -> int | None:
        row = self._run(
            cur,
            "SELECT u.pk FROM units u JOIN namespaces n ON n.id = u.namespace_id"
            " WHERE n.name = ? AND u.unit_id = ?",
            (namespace, unit_id),
        ).fetchone()
        return None if row is None else int(row[0])

    def _insert_messages(
        self, cur: Cursor, unit_pk: int, first_position: int, messages: Sequence[Message]
    ) -> None:
        # multi-row VALUES: one statement (one round trip) per chunk, not one per message
        for chunk_start in range(0, len(messages), ROWS_PER_INSERT):
            chunk = messages[chunk_start : chunk_start + ROWS_PER_INSERT]
            params: list[Any] = []
            for position, message in enumerate(chunk, start=first_position + chunk_start):
                params += (unit_pk, position, *message_params(message))
            self._run(
                cur,
                f"INSERT INTO messages (unit_pk, position, {MESSAGE_COLUMNS}) VALUES "
                + values_clause(len(chunk), 7),
                params,
            )

    def _insert_slices(self, cur: Cursor, unit_pk: int, slices: Sequence[MemorySlice]) -> None:
        for s in slices:
            self._run(
                cur,
                "INSERT INTO slices (unit_pk, slice_id, start_index, end_index, summary,"
                " timestamp, summarizer) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (unit_pk, s.id, s.start_index, s.end_index, s.summary, s.timestamp, s.summarizer),
            )

    def _create_unit(self, cur: Cursor, namespace_id: int, unit_id: str, timestamp: int) -> int:
        row = self._run(
            cur,
            "INSERT INTO units (namespace_id, unit_id, timestamp, message_count, slice_count)"
            " VALUES (?, ?, ?, 0, 0) RETURNING pk",
            (namespace_id, unit_id, timestamp),
        ).fetchone()
        return int(row[0])
