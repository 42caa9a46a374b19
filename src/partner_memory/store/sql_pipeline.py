"""Shared SQL for what the rolling pipeline keeps: trajectory, recent slices, rollings."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from partner_memory.model import (
    MemorySlice,
    Message,
    RollingRecord,
    RollingTotals,
    TrajectoryState,
)
from partner_memory.store.sql_base import (
    MESSAGE_COLUMNS,
    ROWS_PER_INSERT,
    SLICE_COLUMNS,
    Cursor,
    SqlBase,
    message_from_row,
    message_params,
    slice_from_row,
    values_clause,
)

_ID_CHUNK = 500


def _chunks(items: Sequence[str], size: int = _ID_CHUNK) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class PipelineSql(SqlBase):
    """Trajectory and rolling-record verbs of `MemoryStore`."""

    def load_trajectory(self, namespace: str) -> TrajectoryState:
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            row = self._run(
                cur, "SELECT last_interaction FROM activity WHERE namespace_id = ?", (namespace_id,)
            ).fetchone()
            rows = self._run(
                cur,
                f"SELECT {MESSAGE_COLUMNS} FROM trajectory WHERE namespace_id = ? ORDER BY pk",
                (namespace_id,),
            ).fetchall()
        last = None if row is None else int(row[0])
        return TrajectoryState([message_from_row(r) for r in rows], last)

    def append_trajectory(
        self, namespace: str, messages: Sequence[Message], *, last_interaction: int | None
    ) -> None:
        with self._transaction(write=True) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            self._insert_trajectory(cur, namespace_id, messages)
            if last_interaction is not None:
                self._run(
                    cur,
                    "INSERT INTO activity (namespace_id, last_interaction) VALUES (?, ?)"
                    " ON CONFLICT (namespace_id) DO UPDATE"
                    " SET last_interaction = excluded.last_interaction",
                    (namespace_id, last_interaction),
                )

    def _insert_trajectory(
        self, cur: Cursor, namespace_id: int, messages: Sequence[Message]
    ) -> None:
        for start in range(0, len(messages), ROWS_PER_INSERT):
            chunk = messages[start : start + ROWS_PER_INSERT]
            params: list[Any] = []
            for message in chunk:
                params += (namespace_id, *message_params(message))
            self._run(
                cur,
                f"INSERT INTO trajectory (namespace_id, {MESSAGE_COLUMNS}) VALUES "
                + values_clause(len(chunk), 6),
                params,
            )

    def remove_trajectory(self, namespace: str, message_ids: Sequence[str]) -> None:
        with self._transaction(write=True) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            for chunk in _chunks(message_ids):
                self._run(
                    cur,
                    "DELETE FROM trajectory WHERE namespace_id = ? AND message_id IN ("
                    + ", ".join(["?"] * len(chunk))
                    + ")",
                    (namespace_id, *chunk),
                )

    def stored_message_ids(self, namespace: str, message_ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            for chunk in _chunks(message_ids):
                marks = ", ".join(["?"] * len(chunk))
                rows = self._run(
                    cur,
                    "SELECT m.message_id FROM messages m JOIN units u ON u.pk = m.unit_pk"
                    f" WHERE u.namespace_id = ? AND m.message_id IN ({marks})",
                    (namespace_id, *chunk),
                ).fetchall()
                found.update(str(r[0]) for r in rows)
        return found

    def recent_slices(self, namespace: str, limit: int) -> list[tuple[str, MemorySlice]]:
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            columns = ", ".join(f"s.{c}" for c in SLICE_COLUMNS.split(", "))
            rows = self._run(
                cur,
                f"SELECT u.unit_id, {columns} FROM slices s JOIN units u ON u.pk = s.unit_pk"
                " WHERE u.namespace_id = ? ORDER BY s.timestamp DESC, s.pk DESC LIMIT ?",
                (namespace_id, limit),
            ).fetchall()
        return [(str(r[0]), slice_from_row(r[1:])) for r in rows]

    def record_rolling(self, namespace: str, record: RollingRecord) -> None:
        with self._transaction(write=True) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            self._run(
                cur,
                "INSERT INTO rollings (namespace_id, unit_id, slice_id, started_at, idle,"
                " messages, summarizer, llm_calls, prompt_tokens, completion_tokens, llm_ms,"
                " pipeline_ms, fallbacks) VALUES " + values_clause(1, 13),
                (
                    namespace_id,
                    record.unit_id,
                    record.slice_id,
                    record.started_at,
                    int(record.idle),
                    record.messages,
                    record.summarizer,
                    record.llm_calls,
                    record.prompt_tokens,
                    record.completion_tokens,
                    record.llm_ms,
                    record.pipeline_ms,
                    "\n".join(record.fallbacks),
                ),
            )

    def rolling_totals(self, namespace: str) -> RollingTotals:
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            rows = self._run(
                cur,
                "SELECT summarizer, COUNT(*), SUM(messages), SUM(llm_calls), SUM(prompt_tokens),"
                " SUM(completion_tokens), SUM(llm_ms), SUM(pipeline_ms) FROM rollings"
                " WHERE namespace_id = ? GROUP BY summarizer",
                (namespace_id,),
            ).fetchall()
        by_summarizer: Counter[str] = Counter()
        sums = [0.0] * 6
        for row in rows:
            by_summarizer[str(row[0])] = int(row[1])
            for i in range(6):
                sums[i] += float(row[i + 2] or 0)
        return RollingTotals(
            rollings=sum(by_summarizer.values()),
            messages=int(sums[0]),
            llm_calls=int(sums[1]),
            prompt_tokens=int(sums[2]),
            completion_tokens=int(sums[3]),
            llm_ms=sums[4],
            pipeline_ms=sums[5],
            by_summarizer=dict(by_summarizer),
        )
