"""The store verbs written once in SQL that SQLite and PostgreSQL both accept.

The queries live here (units, slices, namespaces, migrations) and in
`window` and `log` (trajectory, rolling records), so the two backends cannot
drift apart; `base` holds the hooks a backend provides.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from partner_memory.errors import ConfigurationError, NotFoundError
from partner_memory.model import (
    MemorySlice,
    Message,
    NamespaceInfo,
    NamespaceOverview,
    UnitInfo,
    UnitUpdate,
)
from partner_memory.store.contract.base import BulkWrite, NewSlice, UnitQuery, UnitWrite
from partner_memory.store.contract.capabilities import NamespaceQuery
from partner_memory.store.contract.refusals import unit_changed
from partner_memory.store.contract.rows import (
    first_generation,
    slice_from_row,
    stored_message,
    unit_from_row,
)
from partner_memory.store.sql.base import MESSAGE_COLUMNS, SLICE_COLUMNS, Cursor, UnitKey
from partner_memory.store.sql.context import ContextSql
from partner_memory.store.sql.dump import DumpSql
from partner_memory.store.sql.forget import ForgetSql
from partner_memory.store.sql.glob import glob_regex
from partner_memory.store.sql.health import HealthSql
from partner_memory.store.sql.items import ItemSql
from partner_memory.store.sql.keys import KeySql
from partner_memory.store.sql.log import LogSql
from partner_memory.store.sql.recall import RecallSql
from partner_memory.store.sql.schema import MIGRATIONS, SCHEMA_TABLE, migration_steps
from partner_memory.store.sql.topics import TopicSql
from partner_memory.store.sql.window import WindowSql, insert_trajectory

__all__ = ["MIGRATIONS", "SCHEMA_TABLE", "SqlStore"]

_NAMESPACE_COLUMNS = (
    "SELECT n.name, n.memory_session_id, n.unit_count, n.slice_count FROM namespaces n"
)
#: Per namespace, each figure by its own index (units_by_time, trajectory_interaction,
#: rollings_by_namespace): a page of namespaces costs what its rows cost, not the table.
_OVERVIEW_COLUMNS = """SELECT n.name, n.unit_count, n.slice_count, n.rolling_seq,
    (SELECT COALESCE(SUM(u.message_count), 0) FROM units u WHERE u.namespace_id = n.id),
    (SELECT COUNT(*) FROM trajectory t WHERE t.namespace_id = n.id),
    (SELECT COALESCE(SUM(r.prompt_tokens + r.completion_tokens), 0)
     FROM rollings r WHERE r.namespace_id = n.id),
    (SELECT MAX(t.interaction) FROM trajectory t WHERE t.namespace_id = n.id),
    (SELECT MAX(u.timestamp) FROM units u WHERE u.namespace_id = n.id)
    FROM namespaces n"""
_UNIT_COLUMNS = "SELECT unit_id, timestamp, message_count, slice_count FROM units"
_SLICE_COLUMNS = f"SELECT {SLICE_COLUMNS} FROM slices"


def _namespace_info(row: Sequence[Any]) -> NamespaceInfo:
    return NamespaceInfo(
        name=row[0], memory_session_id=row[1], unit_count=int(row[2]), slice_count=int(row[3])
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


class SqlStore(
    WindowSql,
    ContextSql,
    LogSql,
    RecallSql,
    TopicSql,
    KeySql,
    ForgetSql,
    DumpSql,
    ItemSql,
    HealthSql,
):
    """Shared implementation of `MemoryStore` over a DB-API connection."""

    # -- schema ------------------------------------------------------------------

    def _read_version(self, cur: Cursor) -> int:
        if self._run(cur, self.dialect.has_table, (SCHEMA_TABLE,)).fetchone() is None:
            return 0
        row = self._run(cur, f"SELECT MAX(version) FROM {SCHEMA_TABLE}").fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def open_schema(self) -> int:
        """Check the schema; migrate (taking the write lock) only when a step is due.

        Opening an up-to-date database is a read, so it never waits for a
        writer, and a read-only store refuses to open an outdated one.
        """
        with self._transaction(write=False) as cur:
            version = self._read_version(cur)
        return self.migrate() if self._migration_due(version) else version

    def _migration_due(self, version: int) -> bool:
        """Whether a schema at `version` needs migrating; a newer one, or an outdated one
        in a read-only store, is refused."""
        newest = len(migration_steps(self.dialect))
        self._check_version(version, newest)
        if version < newest and self.read_only:
            raise ConfigurationError(
                f"database {self.url} has schema version {version}, this partner-memory needs"
                f" {newest}; open it once for writing to upgrade it"
            )
        return version < newest

    @staticmethod
    def _check_version(version: int, newest: int) -> None:
        if version > newest:
            raise ConfigurationError(
                f"database schema version {version} is newer than this version of"
                f" partner-memory supports ({newest}); upgrade partner-memory"
            )

    def migrate(self) -> int:
        """Bring the schema to the newest version in one transaction: an upgrade is all
        or nothing, and a new database costs one commit (one fsync), not one per step."""
        steps = migration_steps(self.dialect)
        with self._transaction(write=True) as cur:
            self._lock_schema(cur)
            self._run(cur, f"CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} (version INTEGER NOT NULL)")
            row = self._run(cur, f"SELECT MAX(version) FROM {SCHEMA_TABLE}").fetchone()
            version = int(row[0]) if row and row[0] is not None else 0
            self._check_version(version, len(steps))
            for done in range(version, len(steps)):
                for statement in steps[done]:
                    self._run(cur, statement)
                self._run(cur, f"INSERT INTO {SCHEMA_TABLE} (version) VALUES (?)", (done + 1,))
        return len(steps)

    def schema_version(self) -> int:
        with self._transaction(write=False) as cur:
            return self._read_version(cur)

    # -- namespaces --------------------------------------------------------------

    def _insert_namespace(self, cur: Cursor, namespace: str, session_id: str) -> None:
        self._run(
            cur,
            "INSERT INTO namespaces (name, memory_session_id, recall_generation) VALUES (?, ?, ?)"
            " ON CONFLICT (name) DO NOTHING",
            (namespace, session_id, first_generation()),
        )

    def _set_session(self, cur: Cursor, namespace_id: int, session_id: str) -> None:
        self._run(
            cur,
            "UPDATE namespaces SET memory_session_id = ? WHERE id = ?",
            (session_id, namespace_id),
        )

    def ensure_namespace(self, namespace: str, session_id: str) -> NamespaceInfo:
        with self._transaction(write=True) as cur:
            self._insert_namespace(cur, namespace, session_id)
            row = self._run(cur, _NAMESPACE_COLUMNS + " WHERE n.name = ?", (namespace,)).fetchone()
            return _namespace_info(row)

    def get_namespace(self, namespace: str) -> NamespaceInfo | None:
        with self._transaction(write=False) as cur:
            row = self._run(cur, _NAMESPACE_COLUMNS + " WHERE n.name = ?", (namespace,)).fetchone()
        return None if row is None else _namespace_info(row)

    def _matching(self, pattern: str | None) -> tuple[str, list[object]]:
        """` AND` the condition keeping names `pattern` matches, and its parameter."""
        if pattern is None:
            return "", []
        param = glob_regex(pattern) if self.dialect.glob_as_regex else pattern
        if param is None:  # a glob that matches nothing
            return " AND 1 = 0", []
        return " AND " + self.dialect.name_glob.format(column="n.name"), [param]

    def list_namespaces(
        self, *, limit: int | None = None, after: str | None = None, matching: str | None = None
    ) -> list[NamespaceInfo]:
        condition, params = self._matching(matching)
        query = _NAMESPACE_COLUMNS + " WHERE 1 = 1" + condition
        if after is not None:
            query, params = query + " AND n.name > ?", [*params, after]
        query += " ORDER BY n.name"
        if limit is not None:
            query, params = query + " LIMIT ?", [*params, limit]
        with self._transaction(write=False) as cur:
            rows = self._run(cur, query, params).fetchall()
        return [_namespace_info(r) for r in rows]

    def count_namespaces(self, *, matching: str | None = None) -> int:
        condition, params = self._matching(matching)
        query = "SELECT COUNT(*) FROM namespaces n WHERE 1 = 1" + condition
        with self._transaction(write=False) as cur:
            return int(self._run(cur, query, params).fetchone()[0])

    def namespace_overviews(self, query: NamespaceQuery) -> list[NamespaceOverview]:
        condition, params = self._matching(query.matching)
        sql = _OVERVIEW_COLUMNS + " WHERE 1 = 1" + condition
        if query.after is not None:
            sql, params = sql + " AND n.name > ?", [*params, query.after]
        if query.search:
            search = query.search.lower()
            escaped = search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            sql += " AND LOWER(n.name) LIKE ? ESCAPE '\\'"
            params.append(f"%{escaped}%")
        sql, params = sql + " ORDER BY n.name LIMIT ?", [*params, query.limit]
        with self._transaction(write=False) as cur:
            rows = self._run(cur, sql, params).fetchall()
        return [
            NamespaceOverview(
                name=r[0],
                unit_count=int(r[1]),
                slice_count=int(r[2]),
                rolling_count=int(r[3]),
                message_count=int(r[4]),
                window_count=int(r[5]),
                llm_tokens=int(r[6]),
                last_activity=max((int(t) for t in r[7:9] if t is not None), default=None),
            )
            for r in rows
        ]

    def set_session(self, namespace: str, session_id: str) -> None:
        with self._transaction(write=True) as cur:
            namespace_id = self._namespace_id(cur, namespace, lock=True)
            self._set_session(cur, namespace_id, session_id)

    # -- writes ------------------------------------------------------------------

    def append(self, namespace: str, messages: Sequence[Message], new: NewSlice) -> UnitUpdate:
        with self._transaction(write=True) as cur:
            _, update = self._append_slice(cur, namespace, messages, new.placed(0, 0))
        return update

    def write_units(self, namespace: str, bulk: BulkWrite) -> None:
        with self._transaction(write=True) as cur:
            self._insert_namespace(cur, namespace, bulk.session_id)
            namespace_id = self._namespace_id(cur, namespace, lock=True)
            self._set_session(cur, namespace_id, bulk.session_id)
            for write in bulk.units:
                self._write_unit(cur, namespace, namespace_id, write)
            if bulk.trajectory is not None:
                self._run(cur, "DELETE FROM trajectory WHERE namespace_id = ?", (namespace_id,))
                insert_trajectory(self, cur, namespace_id, bulk.trajectory)

    def _write_unit(self, cur: Cursor, namespace: str, namespace_id: int, write: UnitWrite) -> None:
        unit = self._open_unit(cur, namespace_id, write.id, write.timestamp)
        if unit.message_count != write.expected_count:
            raise unit_changed(write.id, namespace, unit.message_count, write.expected_count)
        self._extend_unit(
            cur, unit, timestamp=write.timestamp, messages=write.messages, slices=write.slices
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
        return None if row is None else unit_from_row(row)

    def list_units(self, namespace: str, query: UnitQuery) -> list[UnitInfo]:
        clauses, params = _time_filter(query.since, query.until)
        older = ">" if query.oldest_first else "<"
        order = "ASC" if query.oldest_first else "DESC"
        after = query.after
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            if after is not None:
                row = self._run(
                    cur,
                    "SELECT timestamp, pk FROM units WHERE namespace_id = ? AND unit_id = ?",
                    (namespace_id, after),
                ).fetchone()
                if row is None:
                    raise NotFoundError(f"unit {after!r} not found in namespace {namespace!r}")
                clauses += f" AND (timestamp {older} ? OR (timestamp = ? AND pk {older} ?))"
                params += [row[0], row[0], row[1]]
            rows = self._run(
                cur,
                _UNIT_COLUMNS
                + " WHERE namespace_id = ?"
                + clauses
                + f" ORDER BY timestamp {order}, pk {order} LIMIT ? OFFSET ?",
                (namespace_id, *params, query.limit, query.offset),
            ).fetchall()
        return [unit_from_row(r) for r in rows]

    def count_units(
        self, namespace: str, *, since: int | None = None, until: int | None = None
    ) -> int:
        clauses, params = _time_filter(since, until)
        with self._transaction(write=False) as cur:
            if not clauses:  # the count the namespace keeps
                row = self._run(
                    cur, "SELECT unit_count FROM namespaces WHERE name = ?", (namespace,)
                ).fetchone()
                if row is None:
                    raise NotFoundError(f"namespace {namespace!r} not found")
                return int(row[0])
            namespace_id = self._namespace_id(cur, namespace)
            row = self._run(
                cur,
                "SELECT COUNT(*) FROM units WHERE namespace_id = ?" + clauses,
                (namespace_id, *params),
            ).fetchone()
        return int(row[0])

    def unit_ids_starting(self, namespace: str, prefix: str, *, limit: int) -> list[str]:
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            rows = self._run(
                cur,
                "SELECT unit_id FROM units WHERE namespace_id = ? AND substr(unit_id, 1, ?) = ?"
                " ORDER BY unit_id LIMIT ?",
                (namespace_id, len(prefix), prefix, limit),
            ).fetchall()
        return [str(r[0]) for r in rows]

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
            return [] if unit_pk is None else self._messages_in(cur, unit_pk, start, end)

    def read_slices(self, namespace: str, unit_id: str) -> list[MemorySlice]:
        with self._transaction(write=False) as cur:
            unit_pk = self._unit_pk(cur, namespace, unit_id)
            return [] if unit_pk is None else self._slices_of(cur, unit_pk)

    def read_excerpts(
        self, namespace: str, ranges: Sequence[tuple[str, int, int]]
    ) -> list[tuple[list[Message], list[MemorySlice]]]:
        found: list[tuple[list[Message], list[MemorySlice]]] = []
        with self._transaction(write=False) as cur:
            for unit_id, start, end in ranges:
                unit_pk = self._unit_pk(cur, namespace, unit_id)
                if unit_pk is None:
                    found.append(([], []))
                    continue
                over = self._run(
                    cur,
                    _SLICE_COLUMNS + " WHERE namespace_id = ? AND unit_pk = ?"
                    " AND start_index < ? AND end_index > ? ORDER BY timestamp, pk",
                    (*unit_pk, end, start),
                ).fetchall()
                found.append(
                    (self._messages_in(cur, unit_pk, start, end), [slice_from_row(r) for r in over])
                )
        return found

    def _messages_in(self, cur: Cursor, unit: UnitKey, start: int, end: int) -> list[Message]:
        rows = self._run(
            cur,
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE namespace_id = ? AND unit_pk = ?"
            " AND position >= ? AND position < ? ORDER BY position",
            (*unit, start, end),
        ).fetchall()
        return [stored_message(r) for r in rows]

    def _slices_of(self, cur: Cursor, unit: UnitKey) -> list[MemorySlice]:
        rows = self._run(
            cur,
            _SLICE_COLUMNS + " WHERE namespace_id = ? AND unit_pk = ? ORDER BY timestamp, pk",
            unit,
        ).fetchall()
        return [slice_from_row(r) for r in rows]

    def get_slice(self, namespace: str, unit_id: str, slice_id: str) -> MemorySlice | None:
        with self._transaction(write=False) as cur:
            unit_pk = self._unit_pk(cur, namespace, unit_id)
            if unit_pk is None:
                return None
            row = self._run(
                cur,
                _SLICE_COLUMNS + " WHERE namespace_id = ? AND unit_pk = ? AND slice_id = ?",
                (*unit_pk, slice_id),
            ).fetchone()
        return None if row is None else slice_from_row(row)
