"""Shared SQL for what durable consumers stage: their records, recall rows and topics.

`write_staged` runs inside `advance_consumer`'s transaction, beside the consumer's new
position. A rolling whose unit was forgotten since it was logged writes
nothing (what it drew from is gone).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from partner_memory.model import LogEntry
from partner_memory.store.contract.capabilities import StoredRecord
from partner_memory.store.contract.staged import (
    FiledTopics,
    IndexedMessages,
    Record,
    Staged,
    Unrecord,
    check_rows,
    keeps_vectors,
)
from partner_memory.store.sql.base import Cursor, SqlBase
from partner_memory.store.sql.window import units_among

#: Columns of a recall row as inserted...
RECALL_COLUMNS = "unit_pk, position, namespace_id, seq, speaker, timestamp, terms, vector"
#: ...where a row already there (a message indexed twice) is left as it is.
RECALL_CONFLICT = " ON CONFLICT (unit_pk, position) DO NOTHING"
RECORD_COLUMNS = "record_key, value, unit_id, slice_id, message_id"


def write_staged(
    sql: SqlBase,
    cur: Cursor,
    *,
    consumer: str,
    namespace_id: int,
    staged: Sequence[tuple[LogEntry, Sequence[Staged]]],
) -> None:
    """Write the staged writes of a batch of rollings for `consumer`, in order. The
    rollings' units are looked up at once and their recall rows inserted together: a
    few statements per rolling were most of an index's writing."""
    units = _unit_pks(
        sql,
        cur,
        namespace_id,
        [e.unit.id for e, writes in staged if any(isinstance(w, _DERIVED) for w in writes)],
    )
    recall = _RecallRows(sql, cur, namespace_id)
    for entry, writes in staged:
        # the rolling's unit, where recall rows and topics are kept; None if forgotten since
        unit_pk = units.get(entry.unit.id)
        for write in writes:
            if isinstance(write, Record):
                sql._run(
                    cur,
                    "INSERT INTO consumer_records (namespace_id, consumer, "
                    + RECORD_COLUMNS
                    + ") VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (namespace_id, consumer,"
                    " record_key) DO UPDATE SET value = excluded.value, unit_id = excluded.unit_id,"
                    " slice_id = excluded.slice_id, message_id = excluded.message_id",
                    (
                        namespace_id,
                        consumer,
                        write.key,
                        write.encoded(),
                        write.unit,
                        write.slice,
                        write.message,
                    ),
                )
            elif isinstance(write, Unrecord):
                sql._run(
                    cur,
                    "DELETE FROM consumer_records WHERE namespace_id = ? AND consumer = ?"
                    " AND record_key = ?",
                    (namespace_id, consumer, write.key),
                )
            elif unit_pk is None:  # the unit is gone (forgotten since): nothing to index or file
                continue
            elif isinstance(write, IndexedMessages):
                recall.add(unit_pk, entry, write)
            elif isinstance(write, FiledTopics):
                _file(
                    sql, cur, namespace_id=namespace_id, unit_pk=unit_pk, entry=entry, write=write
                )
    recall.insert()


#: What is kept beside a rolling's unit (and written nowhere once it is forgotten).
_DERIVED = (IndexedMessages, FiledTopics)


def _unit_pks(
    sql: SqlBase, cur: Cursor, namespace_id: int, unit_ids: Sequence[str]
) -> dict[str, int]:
    """The keys of the namespace's units among `unit_ids` (a forgotten one is missing)."""
    rows = units_among(sql, cur, namespace_id, unit_ids, "pk")
    return {str(unit_id): int(pk) for unit_id, pk in rows}


class _RecallRows:
    """A batch's recall rows, inserted at once; the namespace's embedder read once."""

    def __init__(self, sql: SqlBase, cur: Cursor, namespace_id: int) -> None:
        self._sql, self._cur, self._namespace_id = sql, cur, namespace_id
        self._embedder: tuple[str | None] | None = None  # (its value), once read
        self._rows: list[tuple[Any, ...]] = []

    def add(self, unit_pk: int, entry: LogEntry, write: IndexedMessages) -> None:
        check_rows(write, entry)
        embedder = self._held(write.embedder)
        words_only = not keeps_vectors(entry.namespace, embedder, write.embedder)
        first = entry.slice.start_index
        self._rows += (
            (
                unit_pk,
                first + offset,
                self._namespace_id,
                entry.seq,
                speaker,
                message.timestamp,
                terms,
                None if words_only else vector,
            )
            for offset, (message, (speaker, terms, vector)) in enumerate(
                zip(entry.messages, write.rows, strict=True)
            )
        )

    def _held(self, given: str) -> str | None:
        """The namespace's embedder before these rows; the first rows' becomes it."""
        if self._embedder is None:
            held = self._sql._run(
                self._cur,
                "SELECT recall_embedder FROM namespaces WHERE id = ?",
                (self._namespace_id,),
            ).fetchone()[0]
            if held is None:  # the namespace's first rows: its vectors are these
                self._sql._run(
                    self._cur,
                    "UPDATE namespaces SET recall_embedder = ? WHERE id = ?",
                    (given, self._namespace_id),
                )
                self._embedder = (given,)
                return None
            self._embedder = (held,)
        return self._embedder[0]

    def insert(self) -> None:
        if self._rows:
            self._sql._insert_rows(
                self._cur, "recall_docs", RECALL_COLUMNS, self._rows, on_conflict=RECALL_CONFLICT
            )


def _file(
    sql: SqlBase,
    cur: Cursor,
    *,
    namespace_id: int,
    unit_pk: int,
    entry: LogEntry,
    write: FiledTopics,
) -> None:
    rows = [
        (namespace_id, unit_pk, entry.slice.id, entry.slice.start_index, entry.slice.end_index, p)
        for p in dict.fromkeys(write.paths)
    ]
    sql._insert_rows(
        cur,
        "topics",
        "namespace_id, unit_pk, slice_id, start_index, end_index, path",
        rows,
        on_conflict=" ON CONFLICT (unit_pk, slice_id, path) DO NOTHING",
    )


def record_from_row(row: Sequence[Any]) -> StoredRecord:
    return StoredRecord(str(row[0]), json.loads(row[1]), row[2], row[3], row[4])
