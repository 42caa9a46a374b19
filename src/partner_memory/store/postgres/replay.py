"""A PostgreSQL transaction that survives a connection found dead before the server answered.

After a server restart (or a cut network), every pooled connection is dead,
and the first calls after the outage would fail although the server is back
(probing each connection before use costs a round trip per transaction, and
the pool then backs off for seconds). Instead: until the server has answered
anything in a transaction, the caller has read nothing and nothing was
committed (COMMIT is sent only at the end), so what was sent can be sent
again, whole, on a fresh connection. `ReplayingCursor` does that, once,
after the pool has swept its other dead connections. Once any answer
arrived, a failure is the caller's as before; a connection the transaction
deadline dropped is never retried (the server is stalled, not gone).

A transaction that can say, afterwards, whether it committed (a turn: its
messages are stored then) sends its COMMIT with its statements, in one
round trip, and reads its last statement's row with it. If its connection
dies in that round trip, the outcome is unknown; the cursor asks
`committed` on a fresh connection and sends the transaction again only if it
did not commit. A single statement that is a transaction of its own
(`autocommitted`) is treated the same way.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

if TYPE_CHECKING:
    import psycopg_pool

log = logging.getLogger(__name__)

T = TypeVar("T")
Connection = psycopg.Connection[tuple[object, ...]]


class _Attempt:
    """One connection from the pool, watched, pipelined, inside a transaction begun by
    hand (the pool's connections autocommit)."""

    def __init__(self) -> None:
        self._stack = ExitStack()
        self.conn: Connection | None = None
        #: whether the last statement's row is read once the pipeline has synced
        self._reading = False
        self.last_row: Any = None
        #: how the connection was when the attempt ended (the pool closes a dead one, the
        #: watchdog forgets it): None while it is in use
        self._ended: tuple[bool, bool] | None = None

    def open(
        self,
        pool: psycopg_pool.ConnectionPool[Any],
        watch: Any,
        dropped: Callable[[Connection], bool],
    ) -> _Attempt:
        """Enter it all; on failure the attempt stays to be ended by the caller. The
        connection is in autocommit mode and BEGIN is sent by hand, so it travels with
        the transaction's first statements instead of costing a round trip of its own.
        The cursor outlives the pipeline: its last row can be read after the final sync."""
        conn = self.conn = self._stack.enter_context(pool.connection())
        self._dropped = dropped
        self._stack.enter_context(watch(conn))
        self._stack.push(self._note_end)  # before the watch and the pool let it go
        self._stack.callback(_rolled_back, conn)  # whatever ended the pipeline
        self.cursor = self._stack.enter_context(conn.cursor())
        self._stack.push(self._read_last)
        self.pipeline = self._stack.enter_context(conn.pipeline())
        self.cursor.execute(b"BEGIN READ ONLY" if conn.read_only else b"BEGIN")
        return self

    def end(self, exc: BaseException | None) -> None:
        """Commit (no exception) or roll back, and give the connection back to the pool.
        COMMIT goes with the pipeline's last sync: one round trip."""
        if exc is None:
            try:  # a statement the server refused is heard of here, with the COMMIT
                self.cursor.execute(b"COMMIT")
            except BaseException as refused:
                self.end(refused)
                raise
            self._stack.close()
        else:
            # every context is left now, the pool's included: one left to the garbage
            # collector would leave the pipeline later, on a connection someone else
            # may hold by then
            self._stack.__exit__(type(exc), exc, exc.__traceback__)

    def commit_reading_last(self) -> Any:
        """Commit, and return the last statement's row, answered by the same sync: the
        COMMIT goes on a cursor of its own, so that the row stays on this one."""
        self._reading = True
        try:
            assert self.conn is not None  # opened
            self.conn.execute(b"COMMIT")
        except BaseException as exc:
            self.end(exc)
            raise
        self._stack.close()
        return self.last_row

    def died(self) -> bool:
        """Whether its connection died, and not because the deadline dropped it (a stalled
        server is not waited for twice)."""
        broken, stalled = self._ended or self._state()
        return broken and not stalled

    def _state(self) -> tuple[bool, bool]:
        conn = self.conn
        return (conn is not None and conn.broken, conn is not None and self._dropped(conn))

    def _note_end(self, *_: object) -> None:
        self._ended = self._state()

    def _read_last(self, failed: type[BaseException] | None, *_: object) -> None:
        if self._reading and failed is None:
            self.last_row = self.cursor.fetchone()


def _rolled_back(conn: Connection) -> None:
    """Leave no transaction open on a connection going back to the pool (a failed
    statement, or a COMMIT that never ran); a broken connection is the pool's to drop."""
    status = conn.info.transaction_status
    if conn.broken or status == psycopg.pq.TransactionStatus.IDLE:
        return
    with contextlib.suppress(psycopg.Error):
        conn.execute(b"ROLLBACK")
    if status == psycopg.pq.TransactionStatus.INERROR:
        _forget_prepared(conn)


def _forget_prepared(conn: Connection) -> None:
    """After the server refused a statement of a pipeline, it skipped the rest of it,
    the Parse of any statement psycopg (3.3) chose to prepare there included, yet psycopg
    records that statement as prepared: every later use of it on this connection would
    fail ("prepared statement _pg3_9 does not exist"), a COMMIT's too. So its record is
    cleared, as psycopg clears it itself after the first ROLLBACK it sees; the next
    statement deallocates them all on the server, and what is used again is prepared
    again."""
    prepared = getattr(conn, "_prepared", None)
    if prepared is not None:
        prepared.clear()


class ReplayingCursor:
    """The `Cursor` of one transaction, sent again on a new connection if its connection
    dies before the server answered anything."""

    def __init__(
        self,
        pool: psycopg_pool.ConnectionPool[Any],
        watch: Any,
        dropped: Callable[[Connection], bool],
        committed: Callable[[], bool] | None = None,
    ) -> None:
        self._pool, self._watch, self._dropped = pool, watch, dropped
        #: Whether this transaction committed, asked on another connection; given, the
        #: COMMIT goes with the statements (`read_with_commit`).
        self._committed = committed
        #: The last statement's row, read with the COMMIT; None until then, or if the
        #: connection died after the COMMIT took effect (read it again).
        self.last_row: Any = None
        #: What was sent since the transaction began; None once anything was answered.
        self._sent: list[tuple[Any, Sequence[Any]]] | None = []
        self._retried = False
        self._attempt = self._opened()

    def _opened(self) -> _Attempt:
        attempt = _Attempt()
        try:
            return attempt.open(self._pool, self._watch, self._dropped)
        except psycopg.OperationalError as exc:  # BEGIN found the connection dead
            return self._again(exc, attempt)
        except BaseException as exc:
            attempt.end(exc)
            raise

    def execute(self, query: Any, params: Sequence[Any] = (), /) -> ReplayingCursor:
        if self._sent is not None:
            self._sent.append((query, params))
        try:
            self._attempt.cursor.execute(query, params)
        except psycopg.OperationalError as exc:  # replayed whole, this statement included
            self._attempt = self._again(exc, self._attempt)
        return self

    def fetchone(self) -> Any:
        return self._answered(lambda cursor: cursor.fetchone())

    def fetchall(self) -> list[Any]:
        return self._answered(lambda cursor: cursor.fetchall())

    @property
    def description(self) -> Any:
        return self._answered(lambda cursor: cursor.description)

    def _answered(self, read: Callable[[psycopg.Cursor[Any]], T]) -> T:
        try:
            value = read(self._attempt.cursor)
        except psycopg.OperationalError as exc:
            self._attempt = self._again(exc, self._attempt)
            value = read(self._attempt.cursor)
        self._sent = None  # the caller may now act on what this server said
        return value

    def _again(self, exc: psycopg.OperationalError, failed: _Attempt) -> _Attempt:
        """A new attempt with everything sent so far, or `exc` when that is not safe."""
        self._may_retry(exc, failed)
        log.info("a PostgreSQL connection died before any answer: sending the transaction again")
        return self._resent()

    def _may_retry(self, exc: psycopg.OperationalError, failed: _Attempt) -> None:
        """End the failed attempt; raise `exc` unless its connection died before any
        answer, for the first time, and not because the server stalled."""
        safe = self._sent is not None and not self._retried and failed.died()
        failed.end(exc)
        if not safe:
            raise exc
        self._retried = True
        self._pool.check()  # the outage left its other connections dead too

    def _resent(self) -> _Attempt:
        attempt = self._opened()  # a failure to open now is not retried again
        try:
            for query, params in self._sent or ():
                attempt.cursor.execute(query, params)
        except BaseException as again:
            attempt.end(again)
            raise
        return attempt

    def end(self, exc: BaseException | None) -> None:
        if exc is None and self._committed is not None:
            self.read_with_commit(self._committed)
            return
        if exc is None and self._sent is not None:
            # nothing was answered yet: hear from the server before the COMMIT, so a
            # connection found dead now is still one whose transaction can be sent again
            try:
                self._answered(lambda _: self._attempt.pipeline.sync())
            except BaseException as refused:  # a statement the server refused
                self._attempt.end(refused)
                raise
        self._attempt.end(exc)

    def read_with_commit(self, committed: Callable[[], bool]) -> None:
        """Commit in the statements' round trip and keep the last one's row (`last_row`).
        A connection that dies before answering anything leaves the outcome unknown:
        `committed` tells, and only a transaction that did not commit is sent again (then
        heard from before its COMMIT, as any other)."""
        failed = self._attempt
        try:
            self.last_row = failed.commit_reading_last()
            return
        except psycopg.OperationalError as exc:
            self._may_retry(exc, failed)
            if committed():
                log.info("a PostgreSQL connection died as its transaction committed")
                return
        log.info("a PostgreSQL connection died before any answer: sending the transaction again")
        self._attempt = self._resent()
        self._answered(lambda _: self._attempt.pipeline.sync())
        self.last_row = self._attempt.commit_reading_last()


@contextmanager
def replaying(
    pool: psycopg_pool.ConnectionPool[Any],
    watch: Any,
    dropped: Callable[[Connection], bool],
    committed: Callable[[], bool] | None = None,
) -> Iterator[ReplayingCursor]:
    """A transaction whose cursor replays as above; committed when the block ends."""
    cursor = ReplayingCursor(pool, watch, dropped, committed)
    try:
        yield cursor
    except BaseException as exc:
        cursor.end(exc)
        raise
    cursor.end(None)


def autocommitted(
    pool: psycopg_pool.ConnectionPool[Any],
    watch: Any,
    dropped: Callable[[Connection], bool],
    query: Any,
    params: Sequence[Any],
    *,
    committed: Callable[[], bool],
) -> Any:
    """The row of one statement run as its own transaction (the pool's connections
    autocommit): sent, committed and answered in one round trip, with no BEGIN or COMMIT.
    If its connection dies before the answer (and not because the deadline dropped it),
    `committed`, asked on a fresh connection, tells whether it took effect: None then
    (the answer was lost), else the statement is sent once more."""
    for retry in (False, True):
        with pool.connection() as conn, watch(conn):
            try:
                return conn.execute(query, params).fetchone()
            except psycopg.OperationalError:
                if retry or not conn.broken or dropped(conn):
                    raise
        pool.check()  # the outage left its other connections dead too
        if committed():
            log.info("a PostgreSQL connection died as its statement committed")
            return None
        log.info("a PostgreSQL connection died before any answer: sending the statement again")
    raise AssertionError("the second attempt returned or raised")
