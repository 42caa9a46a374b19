"""Shared SQL for forgetting: each forget one transaction, recorded without its content.

A forgotten message stays a row at its position, with its id (so a replay
never stores it again) and no text: slice ranges stay valid and the slices
that held it get the summaries the caller made from what remains. A
forgotten unit or namespace is deleted. Either way the recall rows and the
topics of the slices concerned go with it, the window loses it, and the
namespace's generation moves on, so every process rebuilds what it derived
(its recall index, its context blocks). The rows durable consumers keep of
that text (`KeptText`, declared in `consumer_text`) are deleted in the same
transaction, whichever process forgets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from partner_memory.errors import NotFoundError
from partner_memory.store.base import KeptText, Located, Resummary
from partner_memory.store.sql_base import Cursor
from partner_memory.store.sql_context import ContextSql
from partner_memory.store.sql_window import chunks, in_list

#: What a forgotten message's metadata says instead of what it said.
FORGOTTEN_METADATA = '{"forgotten": true}'


class ForgetSql(ContextSql):
    """Forget verbs of `MemoryStore`."""

    def locate_messages(self, namespace: str, message_ids: Sequence[str]) -> list[Located]:
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            rows = self._messages_among(
                cur, message_ids, "m.message_id, u.unit_id, m.position", "?", namespace_id
            )
        return [Located(str(r[0]), str(r[1]), int(r[2])) for r in rows]

    def forget_messages(
        self,
        namespace: str,
        message_ids: Sequence[str],
        resummaries: Sequence[Resummary],
        *,
        at: int,
    ) -> int:
        with self._transaction(write=True) as cur:
            namespace_id = self._namespace_id(cur, namespace, lock=True)
            stored = self._messages_among(
                cur, message_ids, "m.message_id, m.unit_pk, m.position", "?", namespace_id
            )
            for _, unit_pk, position in stored:
                self._run(
                    cur,
                    "UPDATE messages SET content = '', metadata = ?"
                    " WHERE unit_pk = ? AND position = ?",
                    (FORGOTTEN_METADATA, unit_pk, position),
                )
                self._run(
                    cur,
                    "DELETE FROM recall_docs WHERE unit_pk = ? AND position = ?",
                    (unit_pk, position),
                )
            found = {str(r[0]) for r in stored}
            for chunk in chunks(list(message_ids)):
                rows = self._run(
                    cur,
                    "SELECT message_id FROM trajectory WHERE namespace_id = ?"
                    f" AND message_id IN {in_list(len(chunk))}",
                    (namespace_id, *chunk),
                ).fetchall()
                found.update(str(r[0]) for r in rows)
            self._remove_window(cur, namespace_id, list(message_ids))
            if not found:
                raise NotFoundError(
                    f"message {message_ids[0]!r} not found in namespace {namespace!r}"
                    if len(message_ids) == 1
                    else f"none of the {len(message_ids)} messages is in namespace {namespace!r}"
                )
            for change in resummaries:
                # its topics were drawn from what is now forgotten: they go too
                self._run(
                    cur,
                    "DELETE FROM topics WHERE slice_id = ? AND unit_pk ="
                    " (SELECT pk FROM units WHERE namespace_id = ? AND unit_id = ?)",
                    (change.slice_id, namespace_id, change.unit_id),
                )
                self._run(
                    cur,
                    "UPDATE slices SET summary = ?, summarizer = ? WHERE slice_id = ?"
                    " AND unit_pk = (SELECT pk FROM units WHERE namespace_id = ? AND unit_id = ?)",
                    (
                        change.summary,
                        change.summarizer,
                        change.slice_id,
                        namespace_id,
                        change.unit_id,
                    ),
                )
            self._drop_activation(
                cur,
                namespace_id,
                messages=set(message_ids),
                slices={change.slice_id for change in resummaries},
            )
            unit_pks = sorted({int(r[1]) for r in stored})
            self._forget_kept(
                cur,
                namespace,
                [  # the most precise key a table has: its messages, else what held them
                    ("message", lambda: message_ids),
                    ("slice", lambda: [change.slice_id for change in resummaries]),
                    ("unit", lambda: self._column_of(cur, "unit_id", "units", "pk", unit_pks)),
                ],
            )
            self._moved_on(cur, namespace_id)
            self._record(cur, namespace, "message", message_ids, at)
        return len(found)

    def forget_unit(self, namespace: str, unit_id: str, *, at: int) -> None:
        with self._transaction(write=True) as cur:
            namespace_id = self._namespace_id(cur, namespace, lock=True)
            row = self._run(
                cur,
                "SELECT pk, slice_count FROM units WHERE namespace_id = ? AND unit_id = ?",
                (namespace_id, unit_id),
            ).fetchone()
            if row is None:
                raise NotFoundError(f"unit {unit_id!r} not found in namespace {namespace!r}")
            unit_pk, slices = int(row[0]), int(row[1])
            self._forget_kept(
                cur,
                namespace,
                [  # the unit's rows, else those of its slices or messages (read before they go)
                    ("unit", lambda: [unit_id]),
                    (
                        "slice",
                        lambda: self._column_of(cur, "slice_id", "slices", "unit_pk", [unit_pk]),
                    ),
                    (
                        "message",
                        lambda: self._column_of(
                            cur, "message_id", "messages", "unit_pk", [unit_pk]
                        ),
                    ),
                ],
            )
            for table in ("recall_docs", "topics", "messages", "slices"):
                self._run(cur, f"DELETE FROM {table} WHERE unit_pk = ?", (unit_pk,))
            self._run(
                cur,
                "DELETE FROM rollings WHERE namespace_id = ? AND unit_id = ?",
                (namespace_id, unit_id),
            )
            self._run(cur, "DELETE FROM units WHERE pk = ?", (unit_pk,))
            self._drop_activation(cur, namespace_id, units={unit_id})
            self._run(
                cur,
                "UPDATE namespaces SET unit_count = unit_count - 1,"
                " slice_count = slice_count - ? WHERE id = ?",
                (slices, namespace_id),
            )
            self._moved_on(cur, namespace_id)
            self._record(cur, namespace, "unit", [unit_id], at)

    def forget_namespace(self, namespace: str, *, at: int) -> None:
        with self._transaction(write=True) as cur:
            namespace_id = self._namespace_id(cur, namespace, lock=True)
            self._forget_kept(cur, namespace, None)
            by_unit = "unit_pk IN (SELECT pk FROM units WHERE namespace_id = ?)"
            for table in ("recall_docs", "messages", "slices"):
                self._run(cur, f"DELETE FROM {table} WHERE {by_unit}", (namespace_id,))
            for table in (
                "topics",
                "units",
                "trajectory",
                "activity",
                "rollings",
                "rolling_leases",
                "consumers",
                "activations",
            ):
                self._run(cur, f"DELETE FROM {table} WHERE namespace_id = ?", (namespace_id,))
            self._run(cur, "DELETE FROM namespaces WHERE id = ?", (namespace_id,))
            self._record(cur, namespace, "namespace", [namespace], at)

    def forget_log(self, namespace: str, *, limit: int = 100) -> list[tuple[str, str, int]]:
        with self._transaction(write=False) as cur:
            rows = self._run(
                cur,
                "SELECT kind, target, at FROM forgets WHERE namespace = ? ORDER BY pk DESC LIMIT ?",
                (namespace, limit),
            ).fetchall()
        return [(str(r[0]), str(r[1]), int(r[2])) for r in rows]

    def declare_kept_text(self, consumer: str, kept: Sequence[KeptText]) -> None:
        with self._transaction(write=True) as cur:
            self._run(cur, "DELETE FROM consumer_text WHERE consumer = ?", (consumer,))
            rows = [(consumer, k.table, k.namespace, k.unit, k.slice, k.message) for k in kept]
            if rows:
                self._insert_rows(
                    cur,
                    "consumer_text",
                    "consumer, table_name, namespace_column, unit_column, slice_column,"
                    " message_column",
                    rows,
                )

    def _kept(self, cur: Cursor) -> list[KeptText]:
        """Every declared table that still exists (a consumer may have dropped its own)."""
        rows = self._run(
            cur,
            "SELECT table_name, namespace_column, unit_column, slice_column, message_column"
            " FROM consumer_text ORDER BY consumer, table_name",
        ).fetchall()
        kept = [KeptText(str(r[0]), str(r[1]), r[2], r[3], r[4]) for r in rows]
        return [k for k in kept if self._run(cur, self.dialect.has_table, (k.table,)).fetchone()]

    def _forget_kept(
        self,
        cur: Cursor,
        namespace: str,
        keys: Sequence[tuple[str, Callable[[], Sequence[str]]]] | None,
    ) -> None:
        """Delete what consumers keep of what is forgotten: all of the namespace's rows
        (`keys` None), else, per table, those of the first key it has a column for - each
        key's ids read only if a table needs them."""
        kept = self._kept(cur)
        read: dict[str, list[str]] = {}
        for table in kept:
            where = f"DELETE FROM {table.table} WHERE {table.namespace} = ?"
            if keys is None:
                self._run(cur, where, (namespace,))
                continue
            key, ids = next((k, i) for k, i in keys if getattr(table, k) is not None)
            if key not in read:
                read[key] = list(dict.fromkeys(ids()))
            column = getattr(table, key)
            for chunk in chunks(read[key]):
                self._run(
                    cur, f"{where} AND {column} IN {in_list(len(chunk))}", (namespace, *chunk)
                )

    def _column_of(
        self, cur: Cursor, column: str, table: str, by: str, keys: Sequence[int]
    ) -> list[str]:
        """`column` of the rows of `table` whose `by` is one of `keys`."""
        found: list[str] = []
        for chunk in chunks(keys):
            rows = self._run(
                cur, f"SELECT {column} FROM {table} WHERE {by} IN {in_list(len(chunk))}", chunk
            ).fetchall()
            found += (str(r[0]) for r in rows)
        return found

    def _moved_on(self, cur: Cursor, namespace_id: int) -> None:
        self._run(
            cur,
            "UPDATE namespaces SET recall_generation = recall_generation + 1 WHERE id = ?",
            (namespace_id,),
        )

    def _record(
        self, cur: Cursor, namespace: str, kind: str, targets: Sequence[str], at: int
    ) -> None:
        rows = [(namespace, kind, target, at) for target in targets]
        self._insert_rows(cur, "forgets", "namespace, kind, target, at", rows)
