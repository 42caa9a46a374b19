"""The server backend: PostgreSQL through psycopg 3 and a connection pool.

Several processes may share one database: every write locks its namespace
row (SELECT ... FOR UPDATE) before reading the unit it extends, so appends
to one namespace serialise while other namespaces proceed in parallel, and
migrations take a transaction-level advisory lock.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

from partner_memory.errors import (
    ConfigurationError,
    ConflictError,
    InvalidInputError,
    PartnerMemoryError,
    StorageUnavailableError,
)
from partner_memory.store.contract.capabilities import Capability
from partner_memory.store.contract.defaults import DEFAULT_PG_DEADLINE
from partner_memory.store.contract.reads import replica_allowed
from partner_memory.store.contract.rows import message_params
from partner_memory.store.postgres.purge import purge_tables
from partner_memory.store.postgres.replay import ReplayingCursor, autocommitted, replaying
from partner_memory.store.sql.base import Answer, Cursor
from partner_memory.store.sql.dialect import POSTGRESQL
from partner_memory.store.sql.durability import awaited
from partner_memory.store.sql.group_commit import CommitCounts
from partner_memory.store.sql.schema import TEXT_TABLES
from partner_memory.store.sql.verbs import SqlStore
from partner_memory.store.sql.window import WindowWrite

try:
    import psycopg
    import psycopg_pool
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ConfigurationError(
        "PostgreSQL support needs the 'postgres' extra:"
        " pip install -e '.[postgres]' in a clone of partner-memory"
    ) from exc

#: Window rows deleted by one store between two vacuums of the window table.
RECLAIM_AFTER = 5_000

log = logging.getLogger(__name__)
#: libpq's words for a URL it cannot use (as opposed to a server it cannot reach).
_BAD_SETTING = re.compile(r"invalid \S+ value|invalid (connection|URI) (option|query)")
#: How long a read the replica may answer waits for it to replay this process's last
#: commit before it is read from the primary instead (s).
READ_YOUR_WRITES_S = 1.0
#: What may pool connections between this store and the server (`StoreSettings.pg_pooler`).
POOLERS = ("none", "transaction")
_MIGRATION_LOCK_KEY = 0x5041_524D  # "PARM": one advisory lock id for schema changes


#: Step 13's `pm_append_window`: a turn's rows as column arrays, typed so that the
#: call resolves whatever types the driver gives the Python values.
_APPEND_WINDOW = (
    "SELECT * FROM pm_append_window(%s::text, %s::text[], %s::text[], %s::text[],"
    " %s::bigint[], %s::text[], %s::integer[], %s::bigint, %s::boolean, %s::bigint,"
    " %s::boolean)"
)


def redact(url: str) -> str:
    """The URL with any password replaced, for messages and `store.url` (multi-host
    URLs too: `postgresql://u:pw@h1:5432,h2:5432/db`)."""
    parts = urlsplit(url)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    user = userinfo.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{hosts}" if user else f"***@{hosts}"))


#: TCP keepalives of every connection: first probe after this many idle seconds, then
#: one every interval, the connection dropped after this many unanswered.
KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT = 30, 10, 3


class PostgresStore(SqlStore):
    """A `MemoryStore` in a PostgreSQL database, safe to share between processes."""

    dialect = POSTGRESQL
    capabilities = frozenset({Capability.SHARED_ACROSS_HOSTS})
    appends_in_one_call = True

    def __init__(
        self,
        url: str,
        *,
        min_connections: int = 1,
        max_connections: int = 8,
        connect_timeout: float = 10.0,
        read_only: bool = False,
        transaction_deadline: float = DEFAULT_PG_DEADLINE,
        pooler: str = "none",
        read_url: str | None = None,
    ) -> None:
        if pooler not in POOLERS:
            raise ConfigurationError(f"pooler must be one of {', '.join(POOLERS)}, got {pooler!r}")
        self._url = url
        self.read_only = read_only
        #: Behind a transaction-pooling proxy: nothing may outlive a transaction.
        self.transaction_pooled = pooler == "transaction"
        self._watchdog = _Watchdog(transaction_deadline)
        self._trimmed = 0
        self._trim_lock = threading.Lock()
        self._counted = threading.Lock()
        self._commits = 0
        self._syncs = 0
        self._probe(url, connect_timeout)
        self._pool = self._connections(url, min_connections, max_connections, connect_timeout)
        #: A read replica and this process's commits it has replayed (read your writes).
        self._replica = None
        self._replica_seen = 0  # no commit yet: nothing to wait for
        if read_url is not None:
            self._probe(read_url, connect_timeout)
            self._replica = self._connections(read_url, 0, max_connections, connect_timeout)
        try:
            with self._translated():
                self._pool.open(wait=True, timeout=connect_timeout)
                if self._replica is not None:
                    self._replica.open(wait=True, timeout=connect_timeout)
            self.open_schema()
        except BaseException:
            self._pool.close()
            if self._replica is not None:
                self._replica.close()
            raise

    def _connections(
        self, url: str, least: int, most: int, connect_timeout: float
    ) -> psycopg_pool.ConnectionPool[Any]:
        deadline = self._watchdog.deadline
        return psycopg_pool.ConnectionPool(
            url,
            min_size=least,
            max_size=most,
            timeout=connect_timeout,
            kwargs={
                # transactions are begun by hand, pipelined with their statements
                "autocommit": True,
                "connect_timeout": max(1, int(connect_timeout)),
                # the kernel's own checks beside the watchdog: an idle pooled connection
                # to a vanished server is found by keepalives, and unacknowledged data is
                # given up on after the deadline (Linux's TCP_USER_TIMEOUT)
                "keepalives": 1,
                "keepalives_idle": KEEPALIVE_IDLE_S,
                "keepalives_interval": KEEPALIVE_INTERVAL_S,
                "keepalives_count": KEEPALIVE_COUNT,
                "tcp_user_timeout": int(deadline * 1000),
            }
            # a prepared statement lives in one server session, which a transaction
            # pooler hands to other clients between transactions
            | ({"prepare_threshold": None} if self.transaction_pooled else {}),
            configure=self._configure,
            open=False,
        )

    @property
    def url(self) -> str:
        return redact(self._url)

    def _probe(self, url: str, connect_timeout: float) -> None:
        """Connect once before building the pool, whose retries would hide the cause."""
        try:
            psycopg.connect(url, connect_timeout=max(1, int(connect_timeout))).close()
        except psycopg.ProgrammingError as exc:
            raise ConfigurationError(f"bad PostgreSQL URL {redact(url)}: {exc}") from exc
        except psycopg.Error as exc:
            if _BAD_SETTING.search(str(exc)):  # libpq refused the URL itself, not the server
                raise ConfigurationError(
                    f"bad PostgreSQL URL {redact(url)}: {str(exc).strip()}"
                ) from exc
            raise StorageUnavailableError(
                f"cannot connect to PostgreSQL at {redact(url)}: {str(exc).strip()}"
            ) from exc

    def _window_trimmed(self, removed: int) -> None:
        """Every RECLAIM_AFTER window rows deleted by this store, vacuum the window.

        Each recorded message leaves a dead window row once rolled; until a vacuum
        takes them, every count of a namespace's window walks its dead entries
        too, so recording slows as the namespace's history grows (0.85 -> 1.39 ms
        per turn over 20,000 turns with autovacuum off). The window table holds
        only live windows and these rows, so vacuuming it is cheap.
        """
        with self._trim_lock:
            self._trimmed += removed
            if self._trimmed < RECLAIM_AFTER or self.read_only:
                return
            self._trimmed = 0
        try:
            self._vacuum(["trajectory"])
        except PartnerMemoryError as exc:  # e.g. not the table's owner: autovacuum's job then
            log.warning("could not vacuum the window table of %s: %s", redact(self._url), exc)

    def purge(self) -> list[str]:
        """Rewrite each table that holds text (`VACUUM FULL`), consumers' records too: a
        delete leaves the old row versions in the table files until then. Each table is
        locked while it is rewritten. It waits for transactions older than it, and
        refuses when one still sees a deleted version (`postgres.purge`)."""
        self._refuse_if_read_only()
        tables = list(TEXT_TABLES)
        with self._translated(), self._pool.connection() as conn:
            purge_tables(conn, tables)
        return tables

    def _vacuum(self, tables: Sequence[str], *, full: bool = False) -> None:
        with self._translated(), self._pool.connection() as conn:
            for table in tables:  # outside a transaction: the pool's connections autocommit
                conn.execute(f"VACUUM {'FULL ' if full else ''}{table}")

    def _configure(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        # (the client's own flag: BEGIN READ ONLY, `replaying`)
        conn.read_only = self.read_only
        if self.transaction_pooled:  # session settings would reach other clients: each
            return  # transaction sets its own (`_transaction`)
        # JIT compiles a query whose estimated cost is high - as every plan looks
        # without table statistics - which costs ~20 ms to save nothing on queries
        # that read a few rows by index
        conn.execute("SET jit = off")
        # and the server's: a client that vanishes inside a transaction (its locks held)
        # is cut off once the transaction has been idle for the deadline
        conn.execute(
            "SELECT set_config('idle_in_transaction_session_timeout', %s, false)",
            (f"{int(self._watchdog.deadline * 1000)}ms",),
        )

    @contextmanager
    def _transaction(
        self, *, write: bool, committed: Callable[[], bool] | None = None
    ) -> Iterator[Cursor]:
        if write:
            self._refuse_if_read_only()
        synced = awaited()
        watchdog = self._watchdog
        pool = self._pool
        if not write and self._replica is not None and replica_allowed() and self._caught_up():
            pool = self._replica
        with (
            self._translated(),
            replaying(pool, watchdog.watching, watchdog.dropped, committed) as cur,
        ):
            if write and not synced:  # work behind the callers: the next awaited commit
                cur.execute("SET LOCAL synchronous_commit TO off")  # flushes it; pipelined
            if self.transaction_pooled:  # what `_configure` sets per session, per transaction
                cur.execute("SET LOCAL jit TO off")
                timeout = f"{int(self._watchdog.deadline * 1000)}ms"
                cur.execute(f"SET LOCAL idle_in_transaction_session_timeout TO '{timeout}'")
            yield cur
        if write:
            self._count_commit(synced)

    def _caught_up(self) -> bool:
        """Whether the replica holds every commit this process made: it has replayed
        past the primary's flushed position read after them, within
        `READ_YOUR_WRITES_S` (else, or when the replica does not answer, the read
        goes to the primary)."""
        assert self._replica is not None
        with self._counted:
            commits = self._commits
        if commits == self._replica_seen:
            return True
        try:
            with self._translated():
                with self._pool.connection() as conn:
                    row = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
                target = str(row[0]) if row else "0/0"
                deadline = time.monotonic() + READ_YOUR_WRITES_S
                with self._replica.connection() as conn:
                    while True:
                        found = conn.execute(
                            "SELECT COALESCE(pg_last_wal_replay_lsn() >= %s::pg_lsn, true)",
                            (target,),
                        ).fetchone()
                        if found and found[0]:
                            self._replica_seen = commits
                            return True
                        if time.monotonic() >= deadline:
                            return False
                        time.sleep(0.005)
        except StorageUnavailableError as exc:
            log.warning("the read replica does not answer, reading the primary: %s", exc)
            return False

    def _refuse_if_read_only(self) -> None:
        if self.read_only:
            raise ConfigurationError(f"database {self.url} is opened read-only")

    def _count_commit(self, synced: bool) -> None:
        with self._counted:
            self._commits += 1
            if synced:
                self._syncs += 1

    def _append_call(self, write: WindowWrite, committed: Callable[[], bool]) -> Any:
        """The append as one call of `pm_append_window`: the server runs it, commits it
        and answers in one round trip, and the client prepares one statement instead of
        a pipelined transaction of six."""
        self._refuse_if_read_only()
        columns = [list(c) for c in zip(*map(message_params, write.messages), strict=True)]
        ids, roles, contents, stamps, metas = columns or [[] for _ in range(5)]
        synced = awaited()
        params = (
            write.namespace,
            ids,
            roles,
            contents,
            stamps,
            metas,
            [int(i in write.structured) for i in ids],
            write.last_interaction,
            write.drop_structured,
            write.counted[0],
            not synced,  # work behind the callers: its commit does not wait for the flush
        )
        watchdog = self._watchdog
        with self._translated():
            row = autocommitted(
                self._pool,
                watchdog.watching,
                watchdog.dropped,
                _APPEND_WINDOW,
                params,
                committed=committed,
            )
        self._count_commit(synced)
        return row

    @contextmanager
    def _write_answered(self, committed: Callable[[], bool]) -> Iterator[tuple[Cursor, Answer]]:
        """The statements, the COMMIT and the last statement's row in one round trip
        (`ReplayingCursor.read_with_commit`)."""
        answer = Answer()
        with self._transaction(write=True, committed=committed) as cur:
            yield cur, answer
        answer.row = cast(ReplayingCursor, cur).last_row

    @property
    def commit_counts(self) -> CommitCounts:
        """Write transactions committed so far: one per write (the server groups the
        WAL flushes of concurrent commits itself, see `commit_delay`); those of work
        behind the callers do not wait for their flush."""
        with self._counted:
            return CommitCounts(self._commits, self._commits, self._syncs)

    def _run(self, cur: Cursor, query: str, params: Sequence[Any] = ()) -> Cursor:
        self._watchdog.progress()  # the server answered what came before: a long
        return super()._run(cur, query, params)  # transaction is not a stalled one

    def _rows(self, cur: Cursor) -> list[Any]:
        # in pipeline mode the result (and so `description`) arrives only on fetch
        try:
            return cur.fetchall()
        except psycopg.ProgrammingError as exc:
            if type(exc) is psycopg.ProgrammingError:  # "the last operation didn't produce..."
                return []
            raise

    def _lock_schema(self, cur: Cursor) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK_KEY,)).fetchone()

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except PartnerMemoryError:
            raise
        except psycopg.IntegrityError as exc:
            raise ConflictError(f"{self.url}: {exc.diag.message_primary or exc}") from exc
        except psycopg.DataError as exc:  # a value the column cannot hold: bad input, not an outage
            raise InvalidInputError(f"{self.url}: {exc.diag.message_primary or exc}") from exc
        except psycopg_pool.PoolTimeout as exc:
            raise StorageUnavailableError(
                f"cannot connect to PostgreSQL at {self.url}: {exc}"
            ) from exc
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            if self._watchdog.expired():
                raise StorageUnavailableError(
                    f"PostgreSQL at {self.url} did not answer within"
                    f" {self._watchdog.deadline:g}s; the connection was dropped"
                ) from exc
            raise StorageUnavailableError(f"PostgreSQL at {self.url}: {exc}") from exc
        except (
            psycopg.errors.InvalidSqlStatementName,
            psycopg.errors.DuplicatePreparedStatement,
        ) as exc:
            if self.transaction_pooled:
                raise PartnerMemoryError(f"PostgreSQL at {self.url}: {exc}") from exc
            raise ConfigurationError(  # a statement prepared on a session it no longer has
                f"PostgreSQL at {self.url} is reached through a transaction-pooling proxy"
                f" (PgBouncer's pool_mode=transaction: {str(exc).strip()}): set"
                " PARTNER_MEMORY_PG_POOLER=transaction, or pool by session"
            ) from exc
        except psycopg.Error as exc:  # a statement the server refused: a bug, never retried
            raise PartnerMemoryError(
                f"PostgreSQL at {self.url} refused a statement: {exc}"
            ) from exc

    @property
    def open_connections(self) -> int:
        """Connections the pool holds open now (it grows on demand up to its maximum)."""
        return int(self._pool.get_stats().get("pool_size", 0))

    def connection_stats(self) -> dict[str, int]:
        """The pool's connections in use and idle, and requests waiting for one."""
        stats = self._pool.get_stats()
        size, available = int(stats.get("pool_size", 0)), int(stats.get("pool_available", 0))
        return {
            "used": size - available,
            "idle": available,
            "waiting": int(stats.get("requests_waiting", 0)),
        }

    def close(self) -> None:
        self._watchdog.stop()
        self._pool.close()
        if self._replica is not None:
            self._replica.close()


class _Watchdog:
    """Drops a connection whose transaction outlives the deadline.

    libpq waits on its socket for ever: a stalled network or server would
    hold the caller (and the namespace) with it. Shutting the socket down from
    this thread makes the blocked call fail at once; the pool then discards
    the broken connection.
    """

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self._inflight: dict[int, tuple[float, psycopg.Connection[tuple[object, ...]]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._dropped = threading.local()
        self._thread = threading.Thread(target=self._watch, name="pm-pg-watchdog", daemon=True)
        self._thread.start()

    @contextmanager
    def watching(self, conn: psycopg.Connection[tuple[object, ...]]) -> Iterator[None]:
        key = id(conn)
        self._dropped.flag = False
        self._dropped.key = key
        with self._lock:
            self._inflight[key] = (time.monotonic() + self.deadline, conn)
        try:
            yield
        finally:
            self._dropped.key = None
            with self._lock:
                self._dropped.flag = self._inflight.pop(key, None) is None

    def progress(self) -> None:
        """This thread's transaction is being answered: its deadline starts again."""
        key = getattr(self._dropped, "key", None)
        if not isinstance(key, int):
            return
        with self._lock:
            held = self._inflight.get(key)
            if held is not None:
                self._inflight[key] = (time.monotonic() + self.deadline, held[1])

    def dropped(self, conn: psycopg.Connection[tuple[object, ...]]) -> bool:
        """Whether the deadline dropped `conn`, inside `watching(conn)`."""
        with self._lock:
            return id(conn) not in self._inflight

    def expired(self) -> bool:
        """Whether this thread's last transaction was dropped for its deadline."""
        return bool(getattr(self._dropped, "flag", False))

    def _watch(self) -> None:
        while not self._stop.wait(min(0.25, self.deadline / 4)):
            now = time.monotonic()
            with self._lock:
                late = [k for k, (deadline, _) in self._inflight.items() if now > deadline]
                conns = [self._inflight.pop(k)[1] for k in late]
            for conn in conns:
                try:  # shutdown acts on the socket itself, whichever descriptor names it
                    sock = socket.socket(fileno=os.dup(conn.pgconn.socket))
                    sock.shutdown(socket.SHUT_RDWR)
                    sock.close()
                except (OSError, psycopg.Error):
                    pass

    def stop(self) -> None:
        self._stop.set()
