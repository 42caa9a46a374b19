"""The store verbs written once in SQL that SQLite and PostgreSQL both accept.

A backend supplies connections, transactions, its DDL migrations and the
translation of its driver's errors; the queries themselves live here so the
two backends cannot drift apart. Queries use `?` placeholders; a backend whose
driver wants another style rewrites them in `_sql`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from partner_memory.errors import ConfigurationError, ConflictError, NotFoundError
from partner_memory.model import (
    MemorySlice,
    Message,
    NamespaceInfo,
    UnitInfo,
    UnitUpdate,
    dump_metadata,
    load_metadata,
)
from partner_memory.store.base import UnitWrite


class Cursor(Protocol):
    """The part of a DB-API cursor the shared queries use."""

    def execute(self, query: Any, params: Sequence[Any] = ..., /) -> Any: ...

    def executemany(self, query: Any, params_seq: Any, /) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


SCHEMA_TABLE = "partner_memory_schema"
_MESSAGE_ROW = "(?, ?, ?, ?, ?, ?, ?)"
#: Rows per INSERT: 7 parameters each stays below SQLite's 32,766-parameter limit.
_ROWS_PER_INSERT = 500

#: Ordered schema steps; step i moves a database from version i to i + 1.
#: Append new steps, never edit a released one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE namespaces (
            id {serial},
            name TEXT NOT NULL UNIQUE,
            memory_session_id TEXT NOT NULL
        )""",
        """CREATE TABLE units (
            pk {serial},
            namespace_id BIGINT NOT NULL REFERENCES namespaces (id) ON DELETE CASCADE,
            unit_id TEXT NOT NULL,
            timestamp BIGINT NOT NULL,
            message_count BIGINT NOT NULL,
            slice_count BIGINT NOT NULL,
            UNIQUE (namespace_id, unit_id)
        )""",
        "CREATE INDEX units_by_time ON units (namespace_id, timestamp DESC, pk DESC)",
        # messages and slices carry no foreign key: rows are only ever inserted for
        # a unit read in the same transaction, and a per-row key check doubled the
        # cost of an append on PostgreSQL
        """CREATE TABLE messages (
            unit_pk BIGINT NOT NULL,
            position BIGINT NOT NULL,
            message_id TEXT NOT NULL,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            timestamp BIGINT,
            metadata TEXT,
            PRIMARY KEY (unit_pk, position)
        )""",
        """CREATE TABLE slices (
            pk {serial},
            unit_pk BIGINT NOT NULL,
            slice_id TEXT NOT NULL,
            start_index BIGINT NOT NULL,
            end_index BIGINT NOT NULL,
            summary TEXT NOT NULL,
            timestamp BIGINT NOT NULL,
            UNIQUE (unit_pk, slice_id)
        )""",
        "CREATE INDEX slices_by_time ON slices (unit_pk, timestamp, pk)",
    ),
)

_NAMESPACE_COLUMNS = """
    SELECT n.name, n.memory_session_id,
           (SELECT COUNT(*) FROM units u WHERE u.namespace_id = n.id)
    FROM namespaces n
"""
_UNIT_COLUMNS = "SELECT unit_id, timestamp, message_count, slice_count FROM units"
_SLICE_COLUMNS = "SELECT slice_id, start_index, end_index, summary, timestamp FROM slices"


def _unit(row: Sequence[Any]) -> UnitInfo:
    return UnitInfo(id=row[0], timestamp=row[1], message_count=row[2], slice_count=row[3])


def _slice(row: Sequence[Any]) -> MemorySlice:
    return MemorySlice(
        id=row[0], start_index=row[1], end_index=row[2], summary=row[3], timestamp=row[4]
    )


def _message(row: Sequence[Any]) -> Message:
    return Message(
        id=row[0], role=row[1], content=row[2], timestamp=row[3], metadata=load_metadata(row[4])
    )


def _time_filter(since: int | None, until: int | None) -> tuple[str, list[Any]]:
    clauses, params = "", []
    if since is not None:
        clauses += " AND timestamp >= ?"
        params.append(since)
    if until is not None:
        clauses += " AND timestamp < ?"
        params.append(until)
    return clauses, params


class SqlStore(ABC):
    """Shared implementation of `MemoryStore` over a DB-API connection."""

    #: Appended to the namespace read that starts a write, to lock that row.
    lock_clause = ""
    #: Column type of an auto-numbered primary key.
    serial_type = "INTEGER PRIMARY KEY"

    # -- what a backend provides -------------------------------------------------

    @abstractmethod
    def _transaction(self, *, write: bool) -> AbstractContextManager[Cursor]:
        """A cursor inside one transaction, committed on success, driver errors translated."""

    def _migrations(self) -> Sequence[Sequence[str]]:
        return [[step.format(serial=self.serial_type) for step in steps] for steps in MIGRATIONS]

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
        for chunk_start in range(0, len(messages), _ROWS_PER_INSERT):
            chunk = messages[chunk_start : chunk_start + _ROWS_PER_INSERT]
            params: list[Any] = []
            for offset, m in enumerate(chunk, start=first_position + chunk_start):
                metadata = dump_metadata(m.metadata) if m.metadata else None
                params += (unit_pk, offset, m.id, m.role, m.content, m.timestamp, metadata)
            self._run(
                cur,
                "INSERT INTO messages (unit_pk, position, message_id, role, content,"
                " timestamp, metadata) VALUES " + ", ".join([_MESSAGE_ROW] * len(chunk)),
                params,
            )

    def _insert_slices(self, cur: Cursor, unit_pk: int, slices: Sequence[MemorySlice]) -> None:
        for s in slices:
            self._run(
                cur,
                "INSERT INTO slices (unit_pk, slice_id, start_index, end_index, summary,"
                " timestamp) VALUES (?, ?, ?, ?, ?, ?)",
                (unit_pk, s.id, s.start_index, s.end_index, s.summary, s.timestamp),
            )

    def _create_unit(self, cur: Cursor, namespace_id: int, unit_id: str, timestamp: int) -> int:
        row = self._run(
            cur,
            "INSERT INTO units (namespace_id, unit_id, timestamp, message_count, slice_count)"
            " VALUES (?, ?, ?, 0, 0) RETURNING pk",
            (namespace_id, unit_id, timestamp),
        ).fetchone()
        return int(row[0])

    # -- schema ------------------------------------------------------------------

    def migrate(self) -> int:
        """Bring the schema to the newest version, one transaction per step."""
        steps = self._migrations()
        while True:
            with self._transaction(write=True) as cur:
                self._lock_schema(cur)
                self._run(
                    cur, f"CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} (version INTEGER NOT NULL)"
                )
                row = self._run(cur, f"SELECT MAX(version) FROM {SCHEMA_TABLE}").fetchone()
                version = int(row[0]) if row and row[0] is not None else 0
                if version > len(steps):
                    raise ConfigurationError(
                        f"database schema version {version} is newer than this version of"
                        f" partner-memory supports ({len(steps)}); upgrade partner-memory"
                    )
                if version == len(steps):
                    return version
                for statement in steps[version]:
                    self._run(cur, statement)
                self._run(cur, f"INSERT INTO {SCHEMA_TABLE} (version) VALUES (?)", (version + 1,))

    @abstractmethod
    def _lock_schema(self, cur: Cursor) -> None:
        """Serialise concurrent migrations of one database."""

    def schema_version(self) -> int:
        with self._transaction(write=False) as cur:
            row = self._run(cur, f"SELECT MAX(version) FROM {SCHEMA_TABLE}").fetchone()
            return int(row[0]) if row and row[0] is not None else 0

    # -- namespaces --------------------------------------------------------------

    def ensure_namespace(self, namespace: str, session_id: str) -> NamespaceInfo:
        with self._transaction(write=True) as cur:
            self._run(
                cur,
                "INSERT INTO namespaces (name, memory_session_id) VALUES (?, ?)"
                " ON CONFLICT (name) DO NOTHING",
                (namespace, session_id),
            )
            row = self._run(cur, _NAMESPACE_COLUMNS + " WHERE n.name = ?", (namespace,)).fetchone()
            return NamespaceInfo(name=row[0], memory_session_id=row[1], unit_count=int(row[2]))

    def get_namespace(self, namespace: str) -> NamespaceInfo | None:
        with self._transaction(write=False) as cur:
            row = self._run(cur, _NAMESPACE_COLUMNS + " WHERE n.name = ?", (namespace,)).fetchone()
        if row is None:
            return None
        return NamespaceInfo(name=row[0], memory_session_id=row[1], unit_count=int(row[2]))

    def list_namespaces(self) -> list[NamespaceInfo]:
        with self._transaction(write=False) as cur:
            rows = self._run(cur, _NAMESPACE_COLUMNS + " ORDER BY n.name").fetchall()
        return [
            NamespaceInfo(name=r[0], memory_session_id=r[1], unit_count=int(r[2])) for r in rows
        ]

    def set_session(self, namespace: str, session_id: str) -> None:
        with self._transaction(write=True) as cur:
            namespace_id = self._namespace_id(cur, namespace, lock=True)
            self._run(
                cur,
                "UPDATE namespaces SET memory_session_id = ? WHERE id = ?",
                (session_id, namespace_id),
            )

    # -- writes ------------------------------------------------------------------

    def append(
        self,
        namespace: str,
        messages: Sequence[Message],
        summary: str,
        *,
        slice_id: str,
        timestamp: int,
    ) -> UnitUpdate:
        with self._transaction(write=True) as cur:
            row = self._run(
                cur,
                "SELECT id, memory_session_id FROM namespaces WHERE name = ?" + self.lock_clause,
                (namespace,),
            ).fetchone()
            if row is None:
                raise NotFoundError(f"namespace {namespace!r} not found")
            namespace_id, session_id = int(row[0]), str(row[1])
            # a statement of its own: under PostgreSQL's READ COMMITTED it sees what the
            # writer that held the namespace lock before us committed
            unit = self._run(
                cur,
                "SELECT pk, message_count, slice_count FROM units"
                " WHERE namespace_id = ? AND unit_id = ?",
                (namespace_id, session_id),
            ).fetchone()
            if unit is None:
                unit_pk, old_count, slice_count = (
                    self._create_unit(cur, namespace_id, session_id, timestamp),
                    0,
                    0,
                )
            else:
                unit_pk, old_count, slice_count = int(unit[0]), int(unit[1]), int(unit[2])
            new_count = old_count + len(messages)
            memory_slice = MemorySlice(
                id=slice_id,
                start_index=old_count,
                end_index=new_count,
                summary=summary,
                timestamp=timestamp,
            )
            self._insert_messages(cur, unit_pk, old_count, messages)
            self._insert_slices(cur, unit_pk, [memory_slice])
            self._run(
                cur,
                "UPDATE units SET timestamp = ?, message_count = ?, slice_count = ? WHERE pk = ?",
                (timestamp, new_count, slice_count + 1, unit_pk),
            )
        info = UnitInfo(
            id=session_id, timestamp=timestamp, message_count=new_count, slice_count=slice_count + 1
        )
        return UnitUpdate(unit=info, slice=memory_slice)

    def write_units(self, namespace: str, session_id: str, units: Sequence[UnitWrite]) -> None:
        with self._transaction(write=True) as cur:
            self._run(
                cur,
                "INSERT INTO namespaces (name, memory_session_id) VALUES (?, ?)"
                " ON CONFLICT (name) DO NOTHING",
                (namespace, session_id),
            )
            namespace_id = self._namespace_id(cur, namespace, lock=True)
            self._run(
                cur,
                "UPDATE namespaces SET memory_session_id = ? WHERE id = ?",
                (session_id, namespace_id),
            )
            for write in units:
                self._write_unit(cur, namespace, namespace_id, write)

    def _write_unit(self, cur: Cursor, namespace: str, namespace_id: int, write: UnitWrite) -> None:
        row = self._run(
            cur,
            "SELECT pk, message_count, slice_count FROM units"
            " WHERE namespace_id = ? AND unit_id = ?",
            (namespace_id, write.id),
        ).fetchone()
        if row is None:
            unit_pk, count, slice_count = (
                self._create_unit(cur, namespace_id, write.id, write.timestamp),
                0,
                0,
            )
        else:
            unit_pk, count, slice_count = int(row[0]), int(row[1]), int(row[2])
        if count != write.expected_count:
            raise ConflictError(
                f"unit {write.id!r} of namespace {namespace!r} holds {count} messages,"
                f" expected {write.expected_count}; it changed while the write was planned"
            )
        self._insert_messages(cur, unit_pk, count, write.messages)
        self._insert_slices(cur, unit_pk, write.slices)
        self._run(
            cur,
            "UPDATE units SET timestamp = ?, message_count = ?, slice_count = ? WHERE pk = ?",
            (
                write.timestamp,
                count + len(write.messages),
                slice_count + len(write.slices),
                unit_pk,
            ),
        )

    # -- reads -------------------------------------------------------------------

    def get_unit(self, namespace: str, unit_id: str) -> UnitInfo | None:
        with self._transaction(write=False) as cur:
            row = self._run(
                cur,
                _UNIT_COLUMNS
                + " WHERE namespace_id = (SELECT id FROM namespaces WHERE name = ?)"
                + " AND unit_id = ?",
                (namespace, unit_id),
            ).fetchone()
        return None if row is None else _unit(row)

    def list_units(
        self,
        namespace: str,
        *,
        limit: int,
        offset: int = 0,
        since: int | None = None,
        until: int | None = None,
    ) -> list[UnitInfo]:
        clauses, params = _time_filter(since, until)
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            rows = self._run(
                cur,
                _UNIT_COLUMNS
                + " WHERE namespace_id = ?"
                + clauses
                + " ORDER BY timestamp DESC, pk DESC LIMIT ? OFFSET ?",
                (namespace_id, *params, limit, offset),
            ).fetchall()
        return [_unit(r) for r in rows]

    def count_units(
        self, namespace: str, *, since: int | None = None, until: int | None = None
    ) -> int:
        clauses, params = _time_filter(since, until)
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            row = self._run(
                cur,
                "SELECT COUNT(*) FROM units WHERE namespace_id = ?" + clauses,
                (namespace_id, *params),
            ).fetchone()
        return int(row[0])

    def unit_ids(self, namespace: str) -> list[str]:
        """Unit ids in creation order, as the reference's unit set lists them."""
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            rows = self._run(
                cur, "SELECT unit_id FROM units WHERE namespace_id = ? ORDER BY pk", (namespace_id,)
            ).fetchall()
        return [str(r[0]) for r in rows]

    def read_messages(self, namespace: str, unit_id: str, start: int, end: int) -> list[Message]:
        with self._transaction(write=False) as cur:
            unit_pk = self._unit_pk(cur, namespace, unit_id)
            if unit_pk is None:
                return []
            rows = self._run(
                cur,
                "SELECT message_id, role, content, timestamp, metadata FROM messages"
                " WHERE unit_pk = ? AND position >= ? AND position < ? ORDER BY position",
                (unit_pk, start, end),
            ).fetchall()
        return [_message(r) for r in rows]

    def read_slices(self, namespace: str, unit_id: str) -> list[MemorySlice]:
        with self._transaction(write=False) as cur:
            unit_pk = self._unit_pk(cur, namespace, unit_id)
            if unit_pk is None:
                return []
            rows = self._run(
                cur, _SLICE_COLUMNS + " WHERE unit_pk = ? ORDER BY timestamp, pk", (unit_pk,)
            ).fetchall()
        return [_slice(r) for r in rows]

    def get_slice(self, namespace: str, unit_id: str, slice_id: str) -> MemorySlice | None:
        with self._transaction(write=False) as cur:
            unit_pk = self._unit_pk(cur, namespace, unit_id)
            if unit_pk is None:
                return None
            row = self._run(
                cur, _SLICE_COLUMNS + " WHERE unit_pk = ? AND slice_id = ?", (unit_pk, slice_id)
            ).fetchone()
        return None if row is None else _slice(row)
