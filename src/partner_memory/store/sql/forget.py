"""Shared SQL for forgetting: each forget one transaction, recorded without its content.

A forgotten message stays a row at its position, with its id (so a replay
never stores it again) and no text: slice ranges stay valid and the slices
that held it get the summaries the caller made from what remains. A
forgotten unit or namespace is deleted. Either way the recall rows and the
topics of the slices concerned go with it, the window loses it, and the
namespace's generation moves on, so every process rebuilds what it derived
(its recall index, its context blocks). The records durable consumers drew
from it (`Record`) are deleted in the same transaction, whichever process
forgets: by message, else by the slice or unit that held it.
"""

from __future__ import annotations

from collections.abc import Sequence

from partner_memory.errors import NotFoundError
from partner_memory.store.contract.capabilities import Located, MessagesForget
from partner_memory.store.contract.refusals import none_found
from partner_memory.store.sql.base import Cursor, SqlBase
from partner_memory.store.sql.context import drop_activation
from partner_memory.store.sql.items import forget_items
from partner_memory.store.sql.window import chunks, in_list, remove_window

#: What a forgotten message's metadata says instead of what it said.
FORGOTTEN_METADATA = '{"forgotten": true}'


class ForgetSql(SqlBase):
    """Forget verbs of `MemoryStore`."""

    def locate_messages(self, namespace: str, message_ids: Sequence[str]) -> list[Located]:
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            rows = self._messages_among(
                cur, message_ids, "m.message_id, u.unit_id, m.position", "?", namespace_id
            )
        return [Located(str(r[0]), str(r[1]), int(r[2])) for r in rows]

    def forget_messages(self, namespace: str, forget: MessagesForget) -> int:
        message_ids, resummaries, at = forget
        with self._transaction(write=True) as cur:
            namespace_id = self._namespace_id(cur, namespace, lock=True)
            stored = self._messages_among(
                cur, message_ids, "m.message_id, m.unit_pk, m.position", "?", namespace_id
            )
            for _, unit_pk, position in stored:
                self._run(
                    cur,
                    "UPDATE messages SET content = '', metadata = ?"
                    " WHERE namespace_id = ? AND unit_pk = ? AND position = ?",
                    (FORGOTTEN_METADATA, namespace_id, unit_pk, position),
                )
                self._run(
                    cur,
                    "DELETE FROM recall_docs"
                    " WHERE namespace_id = ? AND unit_pk = ? AND position = ?",
                    (namespace_id, unit_pk, position),
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
            remove_window(self, cur, namespace_id, list(message_ids))
            if not found:
                raise none_found(message_ids, namespace)
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
            drop_activation(
                self,
                cur,
                namespace_id,
                messages=set(message_ids),
                slices={change.slice_id for change in resummaries},
            )
            forget_items(self, cur, namespace, message_ids)
            self._forget_records(
                cur,
                namespace_id,
                message_ids,
                [(change.unit_id, change.slice_id) for change in resummaries],
                sorted({int(r[1]) for r in stored}),
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
            its_messages = "SELECT message_id FROM messages WHERE namespace_id = ? AND unit_pk = ?"
            self._run(  # what was drawn from the unit, or from one of its messages
                cur,
                "DELETE FROM consumer_records WHERE namespace_id = ? AND (unit_id = ? OR"
                f" message_id IN ({its_messages}))",
                (namespace_id, unit_id, namespace_id, unit_pk),
            )
            self._run(  # the items it made searchable
                cur,
                f"DELETE FROM items WHERE namespace = ? AND message_id IN ({its_messages})",
                (namespace, namespace_id, unit_pk),
            )
            for table in ("recall_docs", "topics", "messages", "slices"):
                self._run(
                    cur,
                    f"DELETE FROM {table} WHERE namespace_id = ? AND unit_pk = ?",
                    (namespace_id, unit_pk),
                )
            self._run(
                cur,
                "DELETE FROM rollings WHERE namespace_id = ? AND unit_id = ?",
                (namespace_id, unit_id),
            )
            self._run(
                cur, "DELETE FROM units WHERE namespace_id = ? AND pk = ?", (namespace_id, unit_pk)
            )
            drop_activation(self, cur, namespace_id, units={unit_id})
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
            for table in ("recall_docs", "messages", "slices"):
                self._run(cur, f"DELETE FROM {table} WHERE namespace_id = ?", (namespace_id,))
            for table in (
                "topics",
                "units",
                "trajectory",
                "activity",
                "rollings",
                "rolling_leases",
                "consumers",
                "activations",
                "consumer_records",
            ):
                self._run(cur, f"DELETE FROM {table} WHERE namespace_id = ?", (namespace_id,))
            self._run(cur, "DELETE FROM namespaces WHERE id = ?", (namespace_id,))
            self._run(cur, "DELETE FROM items WHERE namespace = ?", (namespace,))
            self._record(cur, namespace, "namespace", [namespace], at)

    def forget_log(self, namespace: str, *, limit: int = 100) -> list[tuple[str, str, int]]:
        with self._transaction(write=False) as cur:
            rows = self._run(
                cur,
                "SELECT kind, target, at FROM forgets WHERE namespace = ? ORDER BY pk DESC LIMIT ?",
                (namespace, limit),
            ).fetchall()
        return [(str(r[0]), str(r[1]), int(r[2])) for r in rows]

    def forgotten_messages(self, namespace: str, message_ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        with self._transaction(write=False) as cur:
            for chunk in chunks(list(message_ids)):
                rows = self._run(
                    cur,
                    "SELECT target FROM forgets WHERE namespace = ? AND kind = 'message'"
                    f" AND target IN {in_list(len(chunk))}",
                    (namespace, *chunk),
                ).fetchall()
                found.update(str(r[0]) for r in rows)
        return found

    def _forget_records(
        self,
        cur: Cursor,
        namespace_id: int,
        message_ids: Sequence[str],
        slices: Sequence[tuple[str, str]],
        unit_pks: Sequence[int],
    ) -> None:
        """Delete the records drawn from forgotten messages: those naming one of them,
        else (naming no message) those of a slice that held one, else (naming no slice
        either) those of a unit that held one."""
        by = "DELETE FROM consumer_records WHERE namespace_id = ? AND "
        for chunk in chunks(list(message_ids)):
            self._run(cur, by + f"message_id IN {in_list(len(chunk))}", (namespace_id, *chunk))
        for unit_id, slice_id in slices:
            self._run(
                cur,
                by + "message_id IS NULL AND unit_id = ? AND slice_id = ?",
                (namespace_id, unit_id, slice_id),
            )
        for pks in chunks(list(unit_pks)):
            self._run(
                cur,
                by + "message_id IS NULL AND slice_id IS NULL AND unit_id IN"
                f" (SELECT unit_id FROM units WHERE pk IN {in_list(len(pks))})",
                (namespace_id, *pks),
            )

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
