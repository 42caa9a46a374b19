"""Shared SQL for the rolling log: committing a rolling, reading the log, its consumers.

A rolling is committed in one transaction - the slice and its messages, the
log row (numbered per namespace), the trimmed window, the new session of an
idle rolling and the released lease - so a crash leaves all of it or none.
Durable consumers advance their position in the log in the same
transaction as their own writes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from itertools import groupby
from operator import itemgetter

from partner_memory.errors import ConflictError
from partner_memory.model import (
    ConsumerStatus,
    LogEntry,
    MemorySlice,
    RollingRecord,
    RollingTotals,
    UnitInfo,
    UnitUpdate,
)
from partner_memory.store.contract.base import (
    CommittedRolling,
    FollowerPosition,
    ReplayStep,
    RollingCommit,
)
from partner_memory.store.contract.capabilities import RecordQuery, StoredRecord
from partner_memory.store.contract.derived import RECENT_FALLBACKS
from partner_memory.store.contract.refusals import lease_lost
from partner_memory.store.contract.rows import (
    COST_COLUMNS,
    cost_from_row,
    slice_from_row,
    stored_message,
)
from partner_memory.store.contract.staged import StagedRollings, checked_rollings
from partner_memory.store.sql.base import (
    MESSAGE_COLUMNS,
    SLICE_COLUMNS,
    Cursor,
    SqlBase,
)
from partner_memory.store.sql.logged_here import logged_entry
from partner_memory.store.sql.replay import LOG_COLUMNS, log_row, write_rollings
from partner_memory.store.sql.staged import RECORD_COLUMNS, record_from_row, write_staged
from partner_memory.store.sql.window import (
    insert_trajectory,
    mark_idle,
    release_lease,
    remove_window,
)

_S_COLUMNS = ", ".join(f"s.{c}" for c in SLICE_COLUMNS.split(", "))
_R_COST = ", ".join(f"r.{c}" for c in COST_COLUMNS.split(", "))
#: A log entry's columns: 7 of the rolling, its cost (7), then its slice's.
_LOG_QUERY = f"""
    SELECT r.seq, u.unit_id, u.pk, r.idle, r.rolling_size, r.retain_divisor, r.unit_slices,
           {_R_COST}, {_S_COLUMNS}
    FROM rollings r
    JOIN units u ON u.namespace_id = r.namespace_id AND u.unit_id = r.unit_id
    JOIN slices s ON s.unit_pk = u.pk AND s.slice_id = r.slice_id
"""


class LogSql(SqlBase):
    """Rolling commit, log, consumer and totals verbs of `MemoryStore`."""

    def commit_rolling(self, namespace: str, commit: RollingCommit) -> CommittedRolling:
        with self._transaction(write=True) as cur:
            namespace_id, generation = self._leased(cur, namespace, commit.holder)
            committed = self._apply_rolling(cur, namespace, namespace_id, commit, commit.drop)
            release_lease(self, cur, namespace_id, commit.holder)
        self._window_trimmed(len(commit.drop))
        return _logged(namespace, generation, [(commit, committed)])[0]

    def commit_replay(
        self, namespace: str, holder: str, steps: Sequence[ReplayStep]
    ) -> list[CommittedRolling]:
        # Only the net effect reaches the window: a message the group records and
        # rolls away again is never written to it, so a long replay leaves no trail
        # of deleted window rows (which PostgreSQL keeps until a vacuum).
        recorded = {m.id for step in steps for m in step.messages}
        dropped = {i for step in steps if step.rolling for i in step.rolling.drop}
        rollings = [step.rolling for step in steps if step.rolling is not None]
        # each rolling deletes the window rows it drops that the group did not record
        olders = [[i for i in r.drop if i not in recorded] for r in rollings]
        with self._transaction(write=True) as cur:
            namespace_id, generation = self._leased(cur, namespace, holder)
            if self.dialect.window_lock:
                self._run(cur, self.dialect.window_lock, (namespace,))
            if any(rolling.holder != holder for rolling in rollings):
                raise ConflictError("a replay commits rollings of its own lease only")
            committed = write_rollings(
                self, cur, namespace, namespace_id, list(zip(rollings, olders, strict=True))
            )
            for step in steps:
                times = step.interactions or [step.interaction] * len(step.messages)
                kept = [
                    (m, t) for m, t in zip(step.messages, times, strict=True) if m.id not in dropped
                ]
                for at, run in groupby(kept, key=itemgetter(1)):  # one insert per time
                    insert_trajectory(
                        self,
                        cur,
                        namespace_id,
                        [m for m, _ in run],
                        step.structured,
                        interaction=at,
                    )
            release_lease(self, cur, namespace_id, holder)
        self._window_trimmed(sum(map(len, olders)))
        return _logged(namespace, generation, list(zip(rollings, committed, strict=True)))

    def _leased(self, cur: Cursor, namespace: str, holder: str) -> tuple[int, int]:
        """The namespace's id, locked, and its recall generation, once its rolling lease is
        known to be `holder`'s."""
        row = self._namespace_row(cur, namespace, "id, recall_generation", lock=True)
        namespace_id, generation = int(row[0]), int(row[1])
        row = self._run(
            cur, "SELECT holder FROM rolling_leases WHERE namespace_id = ?", (namespace_id,)
        ).fetchone()
        if row is None or row[0] != holder:
            raise lease_lost(namespace)
        return namespace_id, generation

    def _apply_rolling(
        self,
        cur: Cursor,
        namespace: str,
        namespace_id: int,
        commit: RollingCommit,
        drop: Sequence[str],
    ) -> CommittedRolling:
        """The rolling's writes; `drop` are the window rows to delete (R12)."""
        update, seq = None, None
        if commit.messages:
            template = MemorySlice(
                commit.slice_id, 0, 0, commit.summary, commit.timestamp, commit.cost.summarizer
            )
            _, update = self._append_slice(cur, namespace, commit.messages, template)
            seq = self._log(cur, namespace_id, update, commit)
        remove_window(self, cur, namespace_id, drop)
        if commit.new_session_id is not None:
            self._run(
                cur,
                "UPDATE namespaces SET memory_session_id = ? WHERE id = ?",
                (commit.new_session_id, namespace_id),
            )
        if commit.idle and commit.last_interaction is not None:
            mark_idle(self, cur, namespace_id, commit.last_interaction)
        return CommittedRolling(update=update, seq=seq)

    def _log(
        self, cur: Cursor, namespace_id: int, update: UnitUpdate, commit: RollingCommit
    ) -> int:
        row = self._run(
            cur,
            "UPDATE namespaces SET rolling_seq = rolling_seq + 1 WHERE id = ?"
            " RETURNING rolling_seq",
            (namespace_id,),
        ).fetchone()
        seq = int(row[0])
        unit = update.unit
        rows = [log_row(namespace_id, seq, commit, unit.id, unit.slice_count)]
        self._insert_rows(cur, "rollings", LOG_COLUMNS, rows)
        return seq

    # -- reading the log -----------------------------------------------------------

    def log_head(self, namespace: str) -> int:
        with self._transaction(write=False) as cur:
            row = self._run(
                cur, "SELECT rolling_seq FROM namespaces WHERE name = ?", (namespace,)
            ).fetchone()
        return 0 if row is None else int(row[0])

    def read_log(self, namespace: str, after: int, *, limit: int = 100) -> list[LogEntry]:
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            return self._read_log(cur, namespace, namespace_id, after, limit)

    def _read_log(
        self, cur: Cursor, namespace: str, namespace_id: int, after: int, limit: int
    ) -> list[LogEntry]:
        rows = self._run(
            cur,
            _LOG_QUERY + " WHERE r.namespace_id = ? AND r.seq > ? ORDER BY r.seq LIMIT ?",
            (namespace_id, after, limit),
        ).fetchall()
        entries = []
        for row in rows:
            memory_slice = slice_from_row(row[14:])
            messages = self._run(
                cur,
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE namespace_id = ?"
                " AND unit_pk = ? AND position >= ? AND position < ? ORDER BY position",
                (namespace_id, row[2], memory_slice.start_index, memory_slice.end_index),
            ).fetchall()
            entries.append(
                LogEntry(
                    namespace=namespace,
                    seq=int(row[0]),
                    unit=UnitInfo(
                        id=str(row[1]),
                        timestamp=memory_slice.timestamp,
                        message_count=memory_slice.end_index,
                        slice_count=int(row[6]),
                    ),
                    slice=memory_slice,
                    messages=tuple(stored_message(m) for m in messages),
                    idle=bool(row[3]),
                    rolling_size=int(row[4]),
                    retain_divisor=None if row[5] is None else int(row[5]),
                    cost=cost_from_row(row[7:14]),
                )
            )
        return entries

    def recent_slices(self, namespace: str, limit: int) -> list[tuple[str, MemorySlice]]:
        with self._transaction(write=False) as cur:
            return recent_slices_of(self, cur, self._namespace_id(cur, namespace), limit)

    # -- consumers -------------------------------------------------------------------

    def consumer_position(self, consumer: str, namespace: str) -> FollowerPosition:
        with self._transaction(write=False) as cur:
            namespace_id, generation = self._namespace_row(cur, namespace, "id, recall_generation")
            row = self._run(
                cur,
                "SELECT position FROM consumers WHERE name = ? AND namespace_id = ?",
                (consumer, namespace_id),
            ).fetchone()
            return FollowerPosition(int(row[0]) if row else 0, int(generation))

    def advance_consumer(
        self, consumer: str, namespace: str, expected: FollowerPosition, staged: StagedRollings
    ) -> None:
        if not (writes := checked_rollings(staged, consumer, self)):
            return
        with self._transaction(write=True) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            self._run(
                cur,
                "INSERT INTO consumers (name, namespace_id, durable) VALUES (?, ?, 1)"
                " ON CONFLICT (name, namespace_id) DO NOTHING",
                (consumer, namespace_id),
            )
            # the row lock makes two processes advancing the same consumer take turns;
            # the second then finds the position moved and writes nothing
            row = self._run(
                cur,
                "SELECT position FROM consumers WHERE name = ? AND namespace_id = ?"
                + self.dialect.lock_clause,
                (consumer, namespace_id),
            ).fetchone()
            now = FollowerPosition(int(row[0]), self._generation(cur, namespace_id))
            if now != expected:
                raise ConflictError(
                    f"consumer {consumer!r} on {namespace!r} is at {tuple(now)}, not"
                    f" {tuple(expected)}: read the log again"
                )
            write_staged(self, cur, consumer=consumer, namespace_id=namespace_id, staged=writes)
            self._run(
                cur,
                "UPDATE consumers SET position = ?, durable = 1"
                " WHERE name = ? AND namespace_id = ?",
                (staged[-1][0].seq, consumer, namespace_id),
            )

    def _generation(self, cur: Cursor, namespace_id: int) -> int:
        row = self._run(
            cur, "SELECT recall_generation FROM namespaces WHERE id = ?", (namespace_id,)
        ).fetchone()
        return int(row[0])

    def read_records(self, namespace: str, query: RecordQuery) -> list[StoredRecord]:
        prefix = query.prefix
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            sql = (
                f"SELECT {RECORD_COLUMNS} FROM consumer_records"
                " WHERE namespace_id = ? AND consumer = ? AND substr(record_key, 1, ?) = ?"
            )
            params: list[object] = [namespace_id, query.consumer, len(prefix), prefix]
            if query.after is not None:
                sql += " AND record_key > ?"
                params.append(query.after)
            rows = self._run(cur, sql + " ORDER BY record_key LIMIT ?", (*params, query.limit))
            return [record_from_row(r) for r in rows.fetchall()]

    def lagging_namespaces(self, consumer: str, *, limit: int = 1000) -> list[str]:
        with self._transaction(write=False) as cur:
            rows = self._run(
                cur,
                "SELECT n.name FROM namespaces n LEFT JOIN consumers c"
                " ON c.namespace_id = n.id AND c.name = ?"
                " WHERE n.rolling_seq > COALESCE(c.position, 0) ORDER BY n.id LIMIT ?",
                (consumer, limit),
            ).fetchall()
        return [str(r[0]) for r in rows]

    def record_consumer_failure(
        self, consumer: str, namespace: str, *, durable: bool, error: str, at: int
    ) -> None:
        with self._transaction(write=True) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            self._run(
                cur,
                "INSERT INTO consumers (name, namespace_id, durable, failures, last_error,"
                " last_failure_at) VALUES (?, ?, ?, 1, ?, ?) ON CONFLICT (name, namespace_id)"
                " DO UPDATE SET failures = consumers.failures + 1,"
                " last_error = excluded.last_error, last_failure_at = excluded.last_failure_at",
                (consumer, namespace_id, int(durable), error, at),
            )

    def consumer_status(self, namespace: str) -> list[ConsumerStatus]:
        with self._transaction(write=False) as cur:
            rows = self._run(
                cur,
                "SELECT c.name, c.durable, c.position, n.rolling_seq, c.failures, c.last_error,"
                " c.last_failure_at FROM consumers c JOIN namespaces n ON n.id = c.namespace_id"
                " WHERE n.name = ? ORDER BY c.name",
                (namespace,),
            ).fetchall()
        return [
            ConsumerStatus(
                name=str(r[0]),
                durable=bool(r[1]),
                position=int(r[2]),
                head=int(r[3]),
                failures=int(r[4]),
                last_error=r[5],
                last_failure_at=None if r[6] is None else int(r[6]),
            )
            for r in rows
        ]

    def rolling_history(
        self, namespace: str, *, limit: int, before: int | None = None
    ) -> list[RollingRecord]:
        query = (
            f"SELECT seq, started_at, idle, unit_id, slice_id, messages, {COST_COLUMNS}"
            " FROM rollings WHERE namespace_id = ?"
        )
        with self._transaction(write=False) as cur:
            params: list[object] = [self._namespace_id(cur, namespace)]
            if before is not None:
                query, params = query + " AND seq < ?", [*params, before]
            rows = self._run(cur, query + " ORDER BY seq DESC LIMIT ?", [*params, limit])
            return [
                RollingRecord(
                    seq=int(r[0]),
                    started_at=int(r[1]),
                    idle=bool(r[2]),
                    unit_id=r[3],
                    slice_id=r[4],
                    messages=int(r[5]),
                    cost=cost_from_row(r[6:]),
                )
                for r in rows.fetchall()
            ]

    def rolling_totals(self, namespace: str) -> RollingTotals:
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            rows = self._run(
                cur,
                "SELECT summarizer, COUNT(*), SUM(messages), SUM(llm_calls), SUM(prompt_tokens),"
                " SUM(completion_tokens), SUM(llm_ms), SUM(pipeline_ms),"
                " SUM(CASE WHEN fallbacks <> '' THEN 1 ELSE 0 END) FROM rollings"
                " WHERE namespace_id = ? GROUP BY summarizer",
                (namespace_id,),
            ).fetchall()
            recent = self._run(
                cur,
                "SELECT fallbacks FROM rollings WHERE namespace_id = ? AND fallbacks <> ''"
                " ORDER BY seq DESC LIMIT ?",
                (namespace_id, RECENT_FALLBACKS),
            ).fetchall()
        by_summarizer: Counter[str] = Counter()
        sums: list[float] = [0.0] * 7
        for row in rows:
            by_summarizer[str(row[0])] = int(row[1])
            for i in range(7):
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
            fallbacks=int(sums[6]),
            recent_fallbacks=tuple(str(r[0]).splitlines()[0] for r in recent),
        )


def recent_slices_of(
    sql: SqlBase, cur: Cursor, namespace_id: int, limit: int
) -> list[tuple[str, MemorySlice]]:
    rows = sql._run(
        cur,
        f"SELECT u.unit_id, {_S_COLUMNS} FROM slices s JOIN units u ON u.pk = s.unit_pk"
        " WHERE s.namespace_id = ? ORDER BY s.timestamp DESC, s.pk DESC LIMIT ?",
        (namespace_id, limit),
    ).fetchall()
    return [(str(r[0]), slice_from_row(r[1:])) for r in rows]


def _logged(
    namespace: str, generation: int, commits: Sequence[tuple[RollingCommit, CommittedRolling]]
) -> list[CommittedRolling]:
    """The committed rollings with the log entries `read_log` will give for them (where
    that is certain: `logged_here`) and the generation they were committed in."""
    return [
        replace(
            done,
            logged=None
            if done.seq is None or done.update is None
            else logged_entry(namespace, done.seq, done.update, commit),
            generation=generation,
        )
        for commit, done in commits
    ]
