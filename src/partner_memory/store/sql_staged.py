"""Shared SQL for what durable consumers stage: their records, recall rows and topics.

`write_staged` runs inside `follow_log`'s transaction, beside the consumer's new
position. A rolling whose unit was forgotten since it was logged writes
nothing (what it drew from is gone).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from partner_memory.model import LogEntry
from partner_memory.store.sql_base import Cursor, SqlBase
from partner_memory.store.staged import (
    FiledTopics,
    IndexedMessages,
    Record,
    Staged,
    StoredRecord,
    Unrecord,
    check_rows,
    keeps_vectors,
)

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
    entry: LogEntry,
    writes: Sequence[Staged],
) -> None:
    """Write one rolling's staged writes for `consumer`."""
    derived = any(isinstance(w, IndexedMessages | FiledTopics) for w in writes)
    # the rolling's unit, where recall rows and topics are kept; None if forgotten since
    unit_pk = sql._unit_pk(cur, entry.namespace, entry.unit.id) if derived else None
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
            _index(sql, cur, namespace_id=namespace_id, unit_pk=unit_pk, entry=entry, write=write)
        elif isinstance(write, FiledTopics):
            _file(sql, cur, namespace_id=namespace_id, unit_pk=unit_pk, entry=entry, write=write)


def _index(
    sql: SqlBase,
    cur: Cursor,
    *,
    namespace_id: int,
    unit_pk: int,
    entry: LogEntry,
    write: IndexedMessages,
) -> None:
    check_rows(write, entry)
    embedder = sql._run(
        cur, "SELECT recall_embedder FROM namespaces WHERE id = ?", (namespace_id,)
    ).fetchone()[0]
    if embedder is None:  # the namespace's first rows: its vectors are these
        sql._run(
            cur,
            "UPDATE namespaces SET recall_embedder = ? WHERE id = ?",
            (write.embedder, namespace_id),
        )
    words_only = not keeps_vectors(entry.namespace, embedder, write.embedder)
    first = entry.slice.start_index
    rows = [
        (
            unit_pk,
            first + offset,
            namespace_id,
            entry.seq,
            speaker,
            message.timestamp,
            terms,
            None if words_only else vector,
        )
        for offset, (message, (speaker, terms, vector)) in enumerate(
            zip(entry.messages, write.rows, strict=True)
        )
    ]
    sql._insert_rows(cur, "recall_docs", RECALL_COLUMNS, rows, on_conflict=RECALL_CONFLICT)


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
