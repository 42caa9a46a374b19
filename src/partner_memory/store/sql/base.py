"""What every group of shared SQL verbs builds on: the backend hooks and helpers.

A backend supplies connections, transactions, schema locking and the
translation of its driver's errors, and names its `Dialect`. Queries use `?`
placeholders; the dialect puts them in the driver's style.
"""

from __future__ import annotations

import functools
import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from partner_memory.errors import NotFoundError
from partner_memory.model import (
    MemorySlice,
    Message,
    UnitInfo,
    UnitUpdate,
)
from partner_memory.store.contract.capabilities import Capability
from partner_memory.store.contract.refusals import already_stored, refuse_repeated_ids
from partner_memory.store.contract.rows import message_params
from partner_memory.store.sql.dialect import Dialect

MESSAGE_COLUMNS = "message_id, role, content, timestamp, metadata"
SLICE_COLUMNS = "slice_id, start_index, end_index, summary, timestamp, summarizer"
#: Rows per INSERT: 7 parameters each stays below SQLite's 32,766-parameter limit.
ROWS_PER_INSERT = 500


#: The columns of a slice's row in `slices`.
SLICE_ROW_COLUMNS = (
    "unit_pk, namespace_id, slice_id, start_index, end_index, summary, timestamp, summarizer"
)


def slice_row(unit_pk: int | None, namespace_id: int, s: MemorySlice) -> tuple[Any, ...]:
    """A slice's values in `SLICE_ROW_COLUMNS`' order."""
    return (
        unit_pk,
        namespace_id,
        s.id,
        s.start_index,
        s.end_index,
        s.summary,
        s.timestamp,
        s.summarizer,
    )


class UnitKey(NamedTuple):
    """Where a unit's rows are: its namespace, and its key within it."""

    namespace_id: int
    pk: int


class UnitRow(NamedTuple):
    pk: int
    namespace_id: int
    message_count: int
    slice_count: int


class Cursor(Protocol):
    """The part of a DB-API cursor the shared queries use."""

    @property
    def description(self) -> Any: ...

    def execute(self, query: Any, params: Sequence[Any] = ..., /) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


@functools.lru_cache(maxsize=1 << 14)
def message_key(message_id: str) -> int:
    """The 64-bit key messages are looked up by: the first 8 bytes of the id's MD5,
    signed (PostgreSQL computes the same in SQL: schema step 4). An append looks its
    messages up, then inserts them: each id's key is computed once for both."""
    digest = hashlib.md5(message_id.encode("utf-8"), usedforsecurity=False).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


#: The columns of a message's row in `messages`.
MESSAGE_ROW_COLUMNS = f"unit_pk, namespace_id, position, id_key, {MESSAGE_COLUMNS}"


def message_row(
    unit_pk: int | None, namespace_id: int, position: int, message: Message
) -> tuple[Any, ...]:
    """A stored message's values in `MESSAGE_ROW_COLUMNS`' order."""
    key = message_key(message.id)
    return (unit_pk, namespace_id, position, key, *message_params(message))


def values_clause(rows: int, columns: int) -> str:
    """`(?, ?), (?, ?)` for a multi-row INSERT."""
    return ", ".join(["(" + ", ".join(["?"] * columns) + ")"] * rows)


@dataclass
class Answer:
    """What the last statement of a `_write_answered` transaction answered: one row, or
    None when the transaction is known to have committed but its answer was lost with
    its connection (read it again)."""

    row: Any = None


class SqlBase(ABC):
    """Connection hooks a backend provides, and the helpers every query group shares."""

    dialect: Dialect
    capabilities: frozenset[Capability] = frozenset()
    read_only = False

    @property
    @abstractmethod
    def url(self) -> str:
        """Where the store lives, safe to print (no password)."""

    # -- what a backend provides -------------------------------------------------

    @abstractmethod
    def _transaction(self, *, write: bool) -> AbstractContextManager[Cursor]:
        """A cursor inside one transaction, committed on success, driver errors translated."""

    @contextmanager
    def _write_answered(self, committed: Callable[[], bool]) -> Iterator[tuple[Cursor, Answer]]:
        """A write transaction whose last statement's row is read once it has committed
        (`Answer.row`). PostgreSQL sends the statements and the COMMIT in one round trip;
        `committed` (asked on another connection) tells whether a transaction whose
        connection died in that round trip committed. Here the row is read before the
        commit, which changes nothing for a backend that waits for each statement."""
        answer = Answer()
        with self._transaction(write=True) as cur:
            yield cur, answer
            answer.row = cur.fetchone()

    def _rows(self, cur: Cursor) -> list[Any]:
        """The rows of the last statement; none for a statement that returns no rows."""
        return [] if cur.description is None else cur.fetchall()

    @abstractmethod
    def _lock_schema(self, cur: Cursor) -> None:
        """Serialise concurrent migrations of one database."""

    # -- helpers -----------------------------------------------------------------

    def _window_trimmed(self, removed: int) -> None:
        """Called after a transaction deleted `removed` window rows; a backend whose
        deleted rows linger until a vacuum reclaims them here."""
        del removed  # SQLite reuses the pages of deleted rows at once

    def _run(self, cur: Cursor, query: str, params: Sequence[Any] = ()) -> Cursor:
        cur.execute(self.dialect.sql(query), params)
        return cur

    def _insert_rows(
        self,
        cur: Cursor,
        table: str,
        columns: str,
        rows: Sequence[Sequence[Any]],
        *,
        on_conflict: str = "",
    ) -> None:
        """Multi-row INSERTs of `rows`, chunked to stay within every driver's parameter limit."""
        width = len(columns.split(", "))
        per_chunk = max(1, (ROWS_PER_INSERT * 7) // width)
        for start in range(0, len(rows), per_chunk):
            chunk = rows[start : start + per_chunk]
            params: list[Any] = [value for row in chunk for value in row]
            self._run(
                cur,
                f"INSERT INTO {table} ({columns}) VALUES "
                + values_clause(len(chunk), width)
                + on_conflict,
                params,
            )

    def _namespace_id(self, cur: Cursor, namespace: str, *, lock: bool = False) -> int:
        return int(self._namespace_row(cur, namespace, "id", lock=lock)[0])

    def _namespace_row(
        self, cur: Cursor, namespace: str, columns: str, *, lock: bool = False
    ) -> tuple[Any, ...]:
        """`columns` of the namespace's row (locked for this transaction with `lock`), or
        NotFoundError."""
        query = f"SELECT {columns} FROM namespaces WHERE name = ?" + (
            self.dialect.lock_clause if lock else ""
        )
        row = self._run(cur, query, (namespace,)).fetchone()
        if row is None:
            raise NotFoundError(f"namespace {namespace!r} not found")
        return tuple(row)

    def _unit_pk(self, cur: Cursor, namespace: str, unit_id: str) -> UnitKey | None:
        row = self._run(
            cur,
            "SELECT u.namespace_id, u.pk FROM units u JOIN namespaces n ON n.id = u.namespace_id"
            " WHERE n.name = ? AND u.unit_id = ?",
            (namespace, unit_id),
        ).fetchone()
        return None if row is None else UnitKey(int(row[0]), int(row[1]))

    def _insert_messages(self, cur: Cursor, unit: UnitRow, messages: Sequence[Message]) -> None:
        # multi-row VALUES: one statement (one round trip) per chunk, not one per message
        rows = [
            message_row(unit.pk, unit.namespace_id, position, message)
            for position, message in enumerate(messages, start=unit.message_count)
        ]
        self._insert_rows(cur, "messages", MESSAGE_ROW_COLUMNS, rows)

    def _insert_slices(self, cur: Cursor, unit: UnitRow, slices: Sequence[MemorySlice]) -> None:
        if slices:
            self._run(
                cur,
                "UPDATE namespaces SET slice_count = slice_count + ? WHERE id = ?",
                (len(slices), unit.namespace_id),
            )
        rows = [slice_row(unit.pk, unit.namespace_id, s) for s in slices]
        self._insert_rows(cur, "slices", SLICE_ROW_COLUMNS, rows)

    def _create_unit(self, cur: Cursor, namespace_id: int, unit_id: str, timestamp: int) -> int:
        row = self._run(
            cur,
            "INSERT INTO units (namespace_id, unit_id, timestamp, message_count, slice_count)"
            " VALUES (?, ?, ?, 0, 0) RETURNING pk",
            (namespace_id, unit_id, timestamp),
        ).fetchone()
        self._run(
            cur, "UPDATE namespaces SET unit_count = unit_count + 1 WHERE id = ?", (namespace_id,)
        )
        return int(row[0])

    def _open_unit(self, cur: Cursor, namespace_id: int, unit_id: str, timestamp: int) -> UnitRow:
        """A unit's pk and counts, the unit created empty when missing.

        A statement of its own: under PostgreSQL's READ COMMITTED it sees what
        the writer that held the namespace lock before us committed.
        """
        row = self._run(
            cur,
            "SELECT pk, message_count, slice_count FROM units"
            " WHERE namespace_id = ? AND unit_id = ?",
            (namespace_id, unit_id),
        ).fetchone()
        if row is None:
            return UnitRow(
                self._create_unit(cur, namespace_id, unit_id, timestamp), namespace_id, 0, 0
            )
        return UnitRow(int(row[0]), namespace_id, int(row[1]), int(row[2]))

    def _extend_unit(
        self,
        cur: Cursor,
        unit: UnitRow,
        *,
        timestamp: int,
        messages: Sequence[Message],
        slices: Sequence[MemorySlice],
    ) -> None:
        """Append messages after the unit's last one, add slices, update its header."""
        self._insert_messages(cur, unit, messages)
        self._insert_slices(cur, unit, slices)
        self._run(
            cur,
            "UPDATE units SET timestamp = ?, message_count = ?, slice_count = ?"
            " WHERE namespace_id = ? AND pk = ?",
            (
                timestamp,
                unit.message_count + len(messages),
                unit.slice_count + len(slices),
                unit.namespace_id,
                unit.pk,
            ),
        )

    def _stored_ids(self, cur: Cursor, namespace_id: int, message_ids: Sequence[str]) -> set[str]:
        """Which ids a namespace's units hold; the cost follows the ids asked about."""
        rows = self._messages_among(cur, message_ids, "m.message_id", "?", namespace_id)
        return {str(r[0]) for r in rows}

    def _messages_among(
        self,
        cur: Cursor,
        message_ids: Sequence[str],
        columns: str,
        namespace_sql: str,
        namespace: object,
    ) -> list[tuple[Any, ...]]:
        """Rows (`columns` of `m`) of the namespace's stored messages among `message_ids`."""
        found: list[tuple[Any, ...]] = []
        for start in range(0, len(message_ids), ROWS_PER_INSERT):
            chunk = list(message_ids[start : start + ROWS_PER_INSERT])
            keys = [message_key(i) for i in chunk]
            array = self.dialect.ids_as_array
            listed = "?" if array else f"({', '.join(['?'] * len(chunk))})"
            query = self.dialect.messages_among.format(
                columns=columns, keys=listed, ids=listed, namespace=namespace_sql
            )
            params = (keys, chunk, namespace) if array else (*keys, *chunk, namespace)
            found += self._run(cur, query, params).fetchall()
        return found

    def _append_slice(
        self, cur: Cursor, namespace: str, messages: Sequence[Message], template: MemorySlice
    ) -> tuple[int, UnitUpdate]:
        """R5 inside the caller's transaction: extend the current session's unit by a slice.

        Locks the namespace row first, so appends of one namespace serialise,
        and refuses any message id the namespace already stores: whatever the
        interleaving of processes, no message is stored twice.
        """
        row = self._namespace_row(cur, namespace, "id, memory_session_id", lock=True)
        namespace_id, session_id = int(row[0]), str(row[1])
        ids = [m.id for m in messages]
        refuse_repeated_ids(ids, "update")
        stored = self._stored_ids(cur, namespace_id, ids)
        if stored:
            raise already_stored(min(stored), namespace)
        unit = self._open_unit(cur, namespace_id, session_id, template.timestamp)
        memory_slice = MemorySlice(
            id=template.id,
            start_index=unit.message_count,
            end_index=unit.message_count + len(messages),
            summary=template.summary,
            timestamp=template.timestamp,
            summarizer=template.summarizer,
        )
        self._extend_unit(
            cur, unit, timestamp=template.timestamp, messages=messages, slices=[memory_slice]
        )
        info = UnitInfo(
            id=session_id,
            timestamp=template.timestamp,
            message_count=memory_slice.end_index,
            slice_count=unit.slice_count + 1,
        )
        return namespace_id, UnitUpdate(unit=info, slice=memory_slice)
