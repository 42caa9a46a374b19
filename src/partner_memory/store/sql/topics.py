"""Shared SQL for topic paths: which slices a topic (and the topics below it) holds.

The rows are derived data written by the "topics" durable consumer; a path
is matched with the paths below it by their first characters, not with
LIKE (whose case rules and wildcards differ per database).
"""

from __future__ import annotations

from partner_memory.model import TOPIC_SEPARATOR
from partner_memory.store.contract.capabilities import TopicSlice
from partner_memory.store.sql.base import SqlBase


class TopicSql(SqlBase):
    """Topic verbs of `MemoryStore`."""

    def topic_paths(self, namespace: str, *, limit: int = 100) -> list[tuple[str, int]]:
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            rows = self._run(
                cur,
                "SELECT path, COUNT(*) FROM topics WHERE namespace_id = ?"
                " GROUP BY path ORDER BY COUNT(*) DESC, path LIMIT ?",
                (namespace_id, limit),
            ).fetchall()
        return [(str(r[0]), int(r[1])) for r in rows]

    def topic_slices(self, namespace: str, path: str) -> list[TopicSlice]:
        below = path + TOPIC_SEPARATOR
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            rows = self._run(
                cur,
                "SELECT u.unit_id, t.slice_id, t.start_index, t.end_index, t.path"
                " FROM topics t JOIN units u ON u.pk = t.unit_pk"
                " WHERE t.namespace_id = ? AND (t.path = ? OR substr(t.path, 1, ?) = ?)"
                " ORDER BY t.unit_pk, t.start_index, t.path",
                (namespace_id, path, len(below), below),
            ).fetchall()
        return [TopicSlice(str(r[0]), str(r[1]), int(r[2]), int(r[3]), str(r[4])) for r in rows]
