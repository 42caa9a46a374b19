"""Shared SQL for a namespace's live state: the window, its last interaction, the rolling lease.

All of it lives in the database so that every process and thread that opens
a namespace sees one window, one last-interaction time and one rolling at a
time. Nothing here is cached.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, NamedTuple, TypeVar

from partner_memory.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    StorageUnavailableError,
)
from partner_memory.model import Message, TrajectoryState, WindowActivity
from partner_memory.store.contract.base import AppendOptions, WindowAppend
from partner_memory.store.contract.refusals import batch_ids
from partner_memory.store.contract.rows import message_params, stored_message
from partner_memory.store.sql.base import MESSAGE_COLUMNS, ROWS_PER_INSERT, Cursor, SqlBase

#: Ids per `IN (...)` list.
T = TypeVar("T")
ID_CHUNK = 500
#: A namespace's id from its name (one `?`), for statements sent without waiting.
_BY_NAME = "(SELECT id FROM namespaces WHERE name = ?)"
#: The window's length after an append, and its newest interaction before the append's.
_WINDOW_AFTER = (
    "SELECT COUNT(*), MAX(CASE WHEN interaction < ? THEN interaction END)"
    f" FROM trajectory WHERE namespace_id = {_BY_NAME}"
)


def _nothing_stored() -> bool:
    return False


def chunks(items: Sequence[T], size: int = ID_CHUNK) -> Iterable[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def in_list(count: int) -> str:
    return "(" + ", ".join(["?"] * count) + ")"


def units_among(
    sql: SqlBase, cur: Cursor, namespace_id: int, unit_ids: Sequence[str], columns: str
) -> list[Any]:
    """(unit_id, `columns`...) of the namespace's units among `unit_ids` (a unit not
    stored, or forgotten since, is missing)."""
    rows: list[Any] = []
    for chunk in chunks(list(dict.fromkeys(unit_ids))):
        rows += sql._run(
            cur,
            f"SELECT unit_id, {columns} FROM units"
            f" WHERE namespace_id = ? AND unit_id IN {in_list(len(chunk))}",
            (namespace_id, *chunk),
        ).fetchall()
    return rows


def _rolled_for(value: int | None) -> int | None:
    """`activity.idle_rolled_for`, whose -1 means no quiet rolled yet."""
    return None if value is None or int(value) < 0 else int(value)


class WindowWrite(NamedTuple):
    """One append to a namespace's window, as `append_trajectory` was given it."""

    namespace: str
    messages: Sequence[Message]
    last_interaction: int | None
    structured: Collection[str]
    drop_structured: bool

    @property
    def counted(self) -> tuple[int, str]:
        """`_WINDOW_AFTER`'s parameters: interactions before this one's, in its namespace."""
        return (-1 if self.last_interaction is None else self.last_interaction, self.namespace)


class WindowSql(SqlBase):
    """Trajectory, activity and rolling-lease verbs of `MemoryStore`."""

    #: Whether the backend appends fresh messages in one statement (`_append_call`).
    appends_in_one_call = False

    # -- the window ----------------------------------------------------------------

    def load_trajectory(self, namespace: str) -> TrajectoryState:
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            return self._window(cur, namespace_id)

    def _window(self, cur: Cursor, namespace_id: int) -> TrajectoryState:
        row = self._run(
            cur, "SELECT idle_rolled_for FROM activity WHERE namespace_id = ?", (namespace_id,)
        ).fetchone()
        rows = self._run(
            cur,
            f"SELECT {MESSAGE_COLUMNS}, interaction FROM trajectory WHERE namespace_id = ?"
            " ORDER BY pk",
            (namespace_id,),
        ).fetchall()
        return TrajectoryState(
            [stored_message(r) for r in rows],
            tuple(None if r[5] is None else int(r[5]) for r in rows),
            _rolled_for(None if row is None else row[0]),
        )

    def _has_namespace(self, namespace: str) -> bool:
        with self._transaction(write=False) as cur:
            row = self._run(cur, "SELECT 1 FROM namespaces WHERE name = ?", (namespace,)).fetchone()
        return row is not None

    def window_activity(self, namespace: str) -> WindowActivity:
        with self._transaction(write=False) as cur:
            row = self._run(
                cur,
                "SELECT (SELECT COUNT(*) FROM trajectory t WHERE t.namespace_id = n.id),"
                " (SELECT MAX(t.interaction) FROM trajectory t WHERE t.namespace_id = n.id),"
                " (SELECT a.idle_rolled_for FROM activity a WHERE a.namespace_id = n.id)"
                " FROM namespaces n WHERE n.name = ?",
                (namespace,),
            ).fetchone()
        if row is None:
            raise NotFoundError(f"namespace {namespace!r} not found")
        last = None if row[1] is None else int(row[1])
        return WindowActivity(int(row[0]), last, _rolled_for(row[2]))

    def trajectory_length(self, namespace: str) -> int:
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            row = self._run(
                cur, "SELECT COUNT(*) FROM trajectory WHERE namespace_id = ?", (namespace_id,)
            ).fetchone()
        return int(row[0])

    def append_trajectory(
        self, namespace: str, messages: Sequence[Message], options: AppendOptions | None = None
    ) -> WindowAppend:
        ids, how = batch_ids(messages), options or AppendOptions()
        try:
            return self._append_window(
                WindowWrite(
                    namespace, messages, how.last_interaction, how.structured, how.drop_structured
                ),
                fresh_ids=how.fresh_ids,
            )
        except (ConflictError, StorageUnavailableError):
            # a missing namespace leaves the rows without one; else the window's
            # unique key refused an id: name it
            if not self._has_namespace(namespace):
                raise NotFoundError(f"namespace {namespace!r} not found") from None
            held = {m.id for m in self.load_trajectory(namespace).messages}
            again = next((i for i in ids if i in held), None)
            if again is None:
                raise
            raise InvalidInputError(f"message id {again!r} is already in the trajectory") from None

    def _append_window(self, write: WindowWrite, *, fresh_ids: bool) -> WindowAppend:
        # If the connection dies with the append in flight, the first message's
        # presence tells whether it committed (a forget of it in the moment between
        # would be read as "not committed"). No row is updated: recorders of one
        # namespace do not queue behind each other's commits. A missing namespace
        # fails the insert.
        committed = (
            functools.partial(self._stores_message, write.namespace, write.messages[0].id)
            if write.messages
            else _nothing_stored  # an empty append, sent twice, changes nothing more
        )
        if fresh_ids and self.appends_in_one_call:
            row = self._append_call(write, committed)
        else:
            row = self._append_statements(write, committed, fresh_ids=fresh_ids)
        if row is None:  # committed, but the answer was lost with the connection
            with self._transaction(write=False) as cur:
                row = self._run(cur, _WINDOW_AFTER, write.counted).fetchone()
        return WindowAppend(int(row[0]), None if row[1] is None else int(row[1]))

    def _append_statements(
        self, write: WindowWrite, committed: Callable[[], bool], *, fresh_ids: bool
    ) -> Any:
        """The append as a transaction of statements; the window's length and newest
        interaction before the append's, or None if that answer was lost. Every
        statement names the namespace by a subquery and nothing is read back until the
        last one, after the commit, so PostgreSQL sends them all and the COMMIT in one
        round trip."""
        namespace, messages = write.namespace, write.messages
        with self._write_answered(committed) as (cur, answer):
            if self.dialect.window_lock:
                self._run(cur, self.dialect.window_lock, (namespace,))
            if not fresh_ids:  # a rolling would skip a stored id: the message would be lost
                ids = [m.id for m in messages]
                stored = self._messages_among(cur, ids, "m.message_id", _BY_NAME, namespace)
                if stored:
                    raise InvalidInputError(
                        f"message id {stored[0][0]!r} is already stored in namespace {namespace!r}"
                    )
            if write.drop_structured:
                self._run(
                    cur,
                    f"DELETE FROM trajectory WHERE namespace_id = {_BY_NAME} AND structured = 1",
                    (namespace,),
                )
            insert_trajectory(
                self,
                cur,
                (_BY_NAME, namespace),
                messages,
                write.structured,
                interaction=write.last_interaction,
            )
            self._run(cur, _WINDOW_AFTER, write.counted)
        return answer.row

    def _append_call(self, write: WindowWrite, committed: Callable[[], bool]) -> Any:
        """`_append_statements` for fresh ids as one statement the database runs as its
        own transaction, where `appends_in_one_call`."""
        raise NotImplementedError(f"{type(self).__name__} appends by statements")

    def _stores_message(self, namespace: str, message_id: str) -> bool:
        """Whether the namespace holds `message_id`, in its window or in a unit."""
        with self._transaction(write=False) as cur:
            held = self._run(
                cur,
                f"SELECT 1 FROM trajectory WHERE namespace_id = {_BY_NAME} AND message_id = ?",
                (namespace, message_id),
            ).fetchone()
            return held is not None or bool(
                self._messages_among(cur, [message_id], "m.message_id", _BY_NAME, namespace)
            )

    def find_messages(self, namespace: str, message_ids: Sequence[str]) -> dict[str, Message]:
        columns = ", ".join(f"m.{c}" for c in MESSAGE_COLUMNS.split(", "))
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            rows = self._messages_among(cur, message_ids, columns, "?", namespace_id)
        return {str(r[0]): stored_message(r) for r in rows}

    def stored_message_ids(self, namespace: str, message_ids: Sequence[str]) -> set[str]:
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            return self._stored_ids(cur, namespace_id, message_ids)

    # -- the rolling lease -----------------------------------------------------------

    def begin_rolling(
        self, namespace: str, holder: str, *, ttl_ms: int, replacing: str | None = None
    ) -> TrajectoryState | None:
        now = self.dialect.now_ms
        with self._transaction(write=True) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            won = self._run(
                cur,
                "INSERT INTO rolling_leases (namespace_id, holder, expires_at)"
                f" VALUES (?, ?, {now} + ?) ON CONFLICT (namespace_id) DO UPDATE"
                " SET holder = excluded.holder, expires_at = excluded.expires_at"
                f" WHERE rolling_leases.expires_at < {now} OR rolling_leases.holder = ?"
                " RETURNING holder",
                (namespace_id, holder, ttl_ms, replacing or ""),
            ).fetchone()
            if won is None:
                return None
            if self.dialect.window_snapshot_lock:
                self._run(cur, self.dialect.window_snapshot_lock, (namespace_id,)).fetchone()
            return self._window(cur, namespace_id)

    def renew_leases(self, holder: str, *, ttl_ms: int) -> None:
        with self._transaction(write=True) as cur:
            self._run(
                cur,
                f"UPDATE rolling_leases SET expires_at = {self.dialect.now_ms} + ?"
                " WHERE holder = ?",
                (ttl_ms, holder),
            )

    def release_rolling(self, namespace: str, holder: str) -> None:
        with self._transaction(write=True) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            release_lease(self, cur, namespace_id, holder)

    def rolling_holder(self, namespace: str) -> str | None:
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            row = self._run(
                cur,
                "SELECT holder FROM rolling_leases WHERE namespace_id = ?"
                f" AND expires_at >= {self.dialect.now_ms}",
                (namespace_id,),
            ).fetchone()
        return None if row is None else str(row[0])

    # -- idle --------------------------------------------------------------------------

    def idle_candidates(self, before: int, among: Sequence[str]) -> list[str]:
        found: list[str] = []
        with self._transaction(write=False) as cur:
            for chunk in chunks(among):
                # one index lookup per namespace for its newest interaction, never a
                # walk over every namespace's window
                rows = self._run(
                    cur,
                    "SELECT name FROM (SELECT n.name,"
                    " (SELECT MAX(t.interaction) FROM trajectory t WHERE t.namespace_id = n.id)"
                    " AS newest,"
                    " COALESCE((SELECT a.idle_rolled_for FROM activity a"
                    " WHERE a.namespace_id = n.id), -1) AS rolled"
                    f" FROM namespaces n WHERE n.name IN {in_list(len(chunk))}) quiet"
                    " WHERE newest < ? AND newest <> rolled",
                    (*chunk, before),
                ).fetchall()
                found += (str(r[0]) for r in rows)
        return found


def insert_trajectory(
    sql: SqlBase,
    cur: Cursor,
    namespace: int | tuple[str, str],
    messages: Sequence[Message],
    structured: Collection[str] = (),
    *,
    interaction: int | None = None,
) -> None:
    """Window rows for a namespace given by id, or by (SQL giving its id, parameter)."""
    key_sql, key = ("?", namespace) if isinstance(namespace, int) else namespace
    row_sql = f"({key_sql}, ?, ?, ?, ?, ?, ?, ?)"
    for start in range(0, len(messages), ROWS_PER_INSERT):
        chunk = messages[start : start + ROWS_PER_INSERT]
        params: list[Any] = []
        for m in chunk:
            params += (key, *message_params(m), int(m.id in structured), interaction)
        sql._run(
            cur,
            f"INSERT INTO trajectory (namespace_id, {MESSAGE_COLUMNS}, structured,"
            " interaction) VALUES " + ", ".join([row_sql] * len(chunk)),
            params,
        )


def remove_window(sql: SqlBase, cur: Cursor, namespace_id: int, message_ids: Sequence[str]) -> None:
    for chunk in chunks(message_ids):
        sql._run(
            cur,
            "DELETE FROM trajectory WHERE namespace_id = ?"
            f" AND message_id IN {in_list(len(chunk))}",
            (namespace_id, *chunk),
        )


def release_lease(sql: SqlBase, cur: Cursor, namespace_id: int, holder: str) -> None:
    sql._run(
        cur,
        "DELETE FROM rolling_leases WHERE namespace_id = ? AND holder = ?",
        (namespace_id, holder),
    )


def mark_idle(
    sql: SqlBase,
    cur: Cursor,
    namespace_id: int,
    last_interaction: int,
    *,
    rolled_for: int | None = None,
) -> None:
    """The quiet after `last_interaction` rolled (or, given, the one after `rolled_for`;
    `last_interaction` is then what a namespace without activity yet is given)."""
    sql._run(
        cur,
        "INSERT INTO activity (namespace_id, last_interaction, idle_rolled_for)"
        " VALUES (?, ?, ?) ON CONFLICT (namespace_id) DO UPDATE"
        " SET idle_rolled_for = excluded.idle_rolled_for",
        (namespace_id, last_interaction, last_interaction if rolled_for is None else rolled_for),
    )
