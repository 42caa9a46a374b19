"""Shared SQL for the recall index's rows: reading them in log order, rebuilding them.

The rows are derived data: the "recall" durable consumer writes them as it
follows the rolling log, and `reindex_recall` rebuilds them from the units
(which stay the source of truth) in one transaction.
"""

from __future__ import annotations

from typing import Any

from partner_memory.errors import NotFoundError
from partner_memory.model import check_page
from partner_memory.store.contract.capabilities import (
    RecallAnalyzer,
    RecallRow,
    RecallState,
    asks,
)
from partner_memory.store.contract.rows import stored_message
from partner_memory.store.sql.base import MESSAGE_COLUMNS, SqlBase
from partner_memory.store.sql.staged import RECALL_COLUMNS, RECALL_CONFLICT

#: LIMIT for all rows (SQLite and PostgreSQL both take a bigint; neither a NULL).
ALL_ROWS = 2**62
#: A message's last characters, enough for `asks` (the same SQL on SQLite and PostgreSQL;
#: neither reads a long message whole to compute it).
CONTENT_TAIL = (
    "CASE WHEN length(m.content) > 16"
    " THEN substr(m.content, length(m.content) - 15, 16) ELSE m.content END"
)


class RecallSql(SqlBase):
    """Recall-index verbs of `MemoryStore`."""

    def recall_state(self, namespace: str, consumer: str) -> RecallState:
        with self._transaction(write=False) as cur:
            row = self._run(
                cur,
                "SELECT n.recall_generation, COALESCE(c.position, 0), n.rolling_seq,"
                " n.recall_embedder"
                " FROM namespaces n LEFT JOIN consumers c"
                " ON c.namespace_id = n.id AND c.name = ? WHERE n.name = ?",
                (consumer, namespace),
            ).fetchone()
        if row is None:
            raise NotFoundError(f"namespace {namespace!r} not found")
        return RecallState(int(row[0]), int(row[1]), int(row[2]), row[3])

    def recall_rows(
        self, namespace: str, after: int, through: int, *, offset: int = 0, limit: int | None = None
    ) -> list[RecallRow]:
        check_page(offset, limit)
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            rows = self._run(
                cur,
                "SELECT u.unit_id, r.position, r.seq, r.speaker, r.timestamp, r.terms, r.vector,"
                f" m.role, m.metadata, {CONTENT_TAIL}"
                " FROM recall_docs r JOIN units u ON u.pk = r.unit_pk"
                " JOIN messages m ON m.namespace_id = r.namespace_id"
                " AND m.unit_pk = r.unit_pk AND m.position = r.position"
                " WHERE r.namespace_id = ? AND r.seq > ? AND r.seq <= ?"
                " ORDER BY r.seq, r.unit_pk, r.position LIMIT ? OFFSET ?",
                (namespace_id, after, through, ALL_ROWS if limit is None else limit, offset),
            ).fetchall()
        return [
            RecallRow(
                str(r[0]),
                int(r[1]),
                int(r[2]),
                r[3],
                r[4],
                str(r[5]),
                _bytes_or_none(r[6]),
                r[7],
                r[8],
                asks(r[9]),
            )
            for r in rows
        ]

    def reindex_recall(self, namespace: str, consumer: str, analysis: RecallAnalyzer) -> int:
        with self._transaction(write=True) as cur:
            namespace_id = self._namespace_id(cur, namespace, lock=True)
            self._run(cur, "DELETE FROM recall_docs WHERE namespace_id = ?", (namespace_id,))
            units = self._run(
                cur, "SELECT pk FROM units WHERE namespace_id = ? ORDER BY pk", (namespace_id,)
            ).fetchall()
            indexed = 0
            for (unit_pk,) in units:
                rows = self._run(
                    cur,
                    f"SELECT {MESSAGE_COLUMNS}, position FROM messages"
                    " WHERE namespace_id = ? AND unit_pk = ? ORDER BY position",
                    (namespace_id, unit_pk),
                ).fetchall()
                messages = [stored_message(row[:5]) for row in rows]
                values: list[tuple[Any, ...]] = [
                    (unit_pk, row[5], namespace_id, 0, speaker, message.timestamp, terms, vector)
                    for row, message, (speaker, terms, vector) in zip(
                        rows, messages, analysis.rows(messages), strict=True
                    )
                ]
                self._insert_rows(
                    cur, "recall_docs", RECALL_COLUMNS, values, on_conflict=RECALL_CONFLICT
                )
                indexed += len(values)
            head = self._run(
                cur, "SELECT rolling_seq FROM namespaces WHERE id = ?", (namespace_id,)
            ).fetchone()[0]
            self._run(
                cur,
                "INSERT INTO consumers (name, namespace_id, durable, position)"
                " VALUES (?, ?, 1, ?) ON CONFLICT (name, namespace_id)"
                " DO UPDATE SET position = excluded.position",
                (consumer, namespace_id, head),
            )
            self._run(
                cur,
                "UPDATE namespaces SET recall_generation = recall_generation + 1,"
                " recall_embedder = ? WHERE id = ?",
                (analysis.embedder_name, namespace_id),
            )
        return indexed


def _bytes_or_none(value: Any) -> bytes | None:
    """A BLOB/BYTEA as bytes (PostgreSQL's driver gives a memoryview)."""
    return None if value is None else bytes(value)
