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

    def open(self, pool: psycopg_pool.ConnectionPool[Any], watch: Any) -> _Attempt:
        """Enter it all; on failure the attempt stays to be ended by the caller. The
        connection is in autocommit mode and BEGIN is sent by hand, so it travels with
        the transaction's first statements instead of costing a round trip of its own."""
        conn = self.conn = self._stack.enter_context(pool.connection())
        self._stack.enter_context(watch(conn))
        self._stack.callback(_rolled_back, conn)  # whatever ended the pipeline
        self.pipeline = self._stack.enter_context(conn.pipeline())
        self.cursor = self._stack.enter_context(conn.cursor())
        self.cursor.execute(b"BEGIN READ ONLY" if conn.read_only else b"BEGIN")
        return self

    def end(self, exc: BaseException | None) -> None:
        """Commit (no exception) or roll back, and give the connection back to the pool.
        COMMIT goes with the pipeline's last sync: one round trip."""
        if exc is None:
            self.cursor.execute(b"COMMIT")
            self._stack.close()
        else:
            self._stack.__exit__(type(exc), exc, exc.__traceback__)


def _rolled_back(conn: Connection) -> None:
    """Leave no transaction open on a connection going back to the pool (a failed
    statement, or a COMMIT that never ran); a broken connection is the pool's to drop."""
    if conn.broken or conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        return
    with contextlib.suppress(psycopg.Error):
        conn.execute(b"ROLLBACK")


class ReplayingCursor:
    """The `Cursor` of one transaction, sent again on a new connection if its connection
    dies before the server answered anything."""

    def __init__(
        self,
        pool: psycopg_pool.ConnectionPool[Any],
        watch: Any,
        dropped: Callable[[Connection], bool],
    ) -> None:
        self._pool, self._watch, self._dropped = pool, watch, dropped
        #: What was sent since the transaction began; None once anything was answered.
        self._sent: list[tuple[Any, Sequence[Any]]] | None = []
        self._retried = False
        self._attempt = self._opened()

    def _opened(self) -> _Attempt:
        attempt = _Attempt()
        try:
            return attempt.open(self._pool, self._watch)
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
        conn = failed.conn
        safe = (
            self._sent is not None
            and not self._retried
            and conn is not None
            and conn.broken
            and not self._dropped(conn)  # a stalled server: no second wait for it
        )
        failed.end(exc)
        if not safe:
            raise exc
        self._retried = True
        log.info("a PostgreSQL connection died before any answer: sending the transaction again")
        self._pool.check()  # the outage left its other connections dead too
        attempt = self._opened()  # a failure to open now is not retried again
        try:
            for query, params in self._sent or ():
                attempt.cursor.execute(query, params)
        except BaseException as again:
            attempt.end(again)
            raise
        return attempt

    def end(self, exc: BaseException | None) -> None:
        if exc is None and self._sent is not None:
            # nothing was answered yet: hear from the server before the COMMIT, so a
            # connection found dead now is still one whose transaction can be sent again
            self._answered(lambda _: self._attempt.pipeline.sync())
        self._attempt.end(exc)


@contextmanager
def replaying(
    pool: psycopg_pool.ConnectionPool[Any], watch: Any, dropped: Callable[[Connection], bool]
) -> Iterator[ReplayingCursor]:
    """A transaction whose cursor replays as above; committed when the block ends."""
    cursor = ReplayingCursor(pool, watch, dropped)
    try:
        yield cursor
    except BaseException as exc:
        cursor.end(exc)
        raise
    cursor.end(None)
