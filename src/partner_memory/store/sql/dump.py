"""Every row of one namespace, out of one store and into another, losslessly.

Surrogate keys (namespace ids, unit pks) are the only thing not carried
over: the destination numbers its own rows. Everything else - message ids,
timestamps and metadata, slice summarisers, the window with its interaction
times, the quiet already rolled, the rolling log with its numbers and costs,
consumer positions and records - arrives exactly as it was, in one transaction.
"""

from __future__ import annotations

from typing import Any

from partner_memory.errors import ConflictError, NotFoundError
from partner_memory.store.contract.capabilities import NamespaceDump
from partner_memory.store.contract.rows import first_generation
from partner_memory.store.sql.base import (
    Cursor,
    SqlBase,
    message_key,
)

_UNIT = "unit_id, timestamp, message_count, slice_count"
_MESSAGE = "position, message_id, role, content, timestamp, metadata"
_SLICE = "slice_id, start_index, end_index, summary, timestamp, summarizer"
_WINDOW = "message_id, role, content, timestamp, metadata, structured, interaction"
_ROLLING = (
    "seq, unit_id, slice_id, started_at, idle, messages, summarizer, llm_calls, prompt_tokens,"
    " completion_tokens, llm_ms, pipeline_ms, fallbacks, rolling_size, retain_divisor,"
    " unit_slices, holder"
)
_CONSUMER = "name, durable, position, failures, last_error, last_failure_at"
_RECORD = "consumer, record_key, value, unit_id, slice_id, message_id"
_ITEM = "item_key, value, created_at, updated_at, expires_at, ttl, message_id"


def _rows(cur: Cursor) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in cur.fetchall()]


class DumpSql(SqlBase):
    """`export_namespace` and `import_namespace` of `MemoryStore`."""

    def export_namespace(self, namespace: str) -> NamespaceDump:
        with self._transaction(write=False) as cur:
            row = self._run(
                cur,
                "SELECT id, memory_session_id, rolling_seq FROM namespaces WHERE name = ?",
                (namespace,),
            ).fetchone()
            if row is None:
                raise NotFoundError(f"namespace {namespace!r} not found")
            nid = int(row[0])
            activity = self._run(
                cur,
                "SELECT last_interaction, idle_rolled_for FROM activity WHERE namespace_id = ?",
                (nid,),
            ).fetchone()
            return NamespaceDump(
                name=namespace,
                memory_session_id=str(row[1]),
                rolling_seq=int(row[2]),
                units=self._select(cur, _UNIT, "units", "pk", nid),
                messages=self._per_unit(cur, _MESSAGE, "messages", "x.position", nid),
                slices=self._per_unit(cur, _SLICE, "slices", "x.pk", nid),
                window=self._select(cur, _WINDOW, "trajectory", "pk", nid),
                activity=None if activity is None else tuple(activity),
                rollings=self._select(cur, _ROLLING, "rollings", "seq", nid),
                consumers=self._select(cur, _CONSUMER, "consumers", "name", nid),
                records=self._select(cur, _RECORD, "consumer_records", "consumer, record_key", nid),
                items=_rows(
                    self._run(
                        cur,
                        f"SELECT {_ITEM} FROM items WHERE namespace = ? ORDER BY item_key",
                        (namespace,),
                    )
                ),
            )

    def _select(
        self, cur: Cursor, columns: str, table: str, order: str, nid: int
    ) -> list[tuple[Any, ...]]:
        query = f"SELECT {columns} FROM {table} WHERE namespace_id = ? ORDER BY {order}"
        return _rows(self._run(cur, query, (nid,)))

    def _per_unit(
        self, cur: Cursor, columns: str, table: str, order: str, nid: int
    ) -> list[tuple[Any, ...]]:
        """Rows keyed by unit pk, with the unit's id in front instead."""
        prefixed = ", ".join("x." + c for c in columns.split(", "))
        query = (
            f"SELECT u.unit_id, {prefixed} FROM units u"
            f" JOIN {table} x ON x.namespace_id = u.namespace_id AND x.unit_pk = u.pk"
            f" WHERE u.namespace_id = ? ORDER BY u.pk, {order}"
        )
        return _rows(self._run(cur, query, (nid,)))

    def import_namespace(self, dump: NamespaceDump) -> None:
        with self._transaction(write=True) as cur:
            exists = self._run(
                cur, "SELECT 1 FROM namespaces WHERE name = ?", (dump.name,)
            ).fetchone()
            if exists is not None:
                raise ConflictError(
                    f"namespace {dump.name!r} already exists in {self.url}; nothing copied"
                )
            nid = int(
                self._run(
                    cur,
                    "INSERT INTO namespaces (name, memory_session_id, rolling_seq, unit_count,"
                    " slice_count, recall_generation) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                    (
                        dump.name,
                        dump.memory_session_id,
                        dump.rolling_seq,
                        len(dump.units),
                        len(dump.slices),
                        first_generation(),
                    ),
                ).fetchone()[0]
            )
            pks: dict[str, int] = {}
            for unit in dump.units:
                pks[str(unit[0])] = int(
                    self._run(
                        cur,
                        f"INSERT INTO units (namespace_id, {_UNIT}) VALUES (?, ?, ?, ?, ?)"
                        " RETURNING pk",
                        (nid, *unit),
                    ).fetchone()[0]
                )
            messages = [
                (pks[str(r[0])], nid, message_key(str(r[2])), *r[1:]) for r in dump.messages
            ]
            self._insert_rows(
                cur, "messages", "unit_pk, namespace_id, id_key, " + _MESSAGE, messages
            )
            slices = [(pks[str(r[0])], nid, *r[1:]) for r in dump.slices]
            self._insert_rows(cur, "slices", "unit_pk, namespace_id, " + _SLICE, slices)
            by_namespace = [
                ("trajectory", _WINDOW, dump.window),
                (
                    "activity",
                    "last_interaction, idle_rolled_for",
                    [dump.activity] if dump.activity else [],
                ),
                ("rollings", _ROLLING, dump.rollings),
                ("consumers", _CONSUMER, dump.consumers),
                ("consumer_records", _RECORD, dump.records),
            ]
            for table, columns, rows in by_namespace:
                self._insert_rows(cur, table, "namespace_id, " + columns, [(nid, *r) for r in rows])
            items = [(dump.name, *r) for r in dump.items]
            self._insert_rows(cur, "items", "namespace, " + _ITEM, items)
