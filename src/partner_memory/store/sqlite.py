"""The embedded default backend: one SQLite file in WAL mode.

WAL lets readers run while a writer commits; every write takes the write
lock up front (BEGIN IMMEDIATE) so two writers never deadlock on upgrade.
A transaction borrows a connection from a small pool and gives it back, so
the number of connections (and file descriptors) is bounded however many
threads and handles come and go. Read-only stores open the file with
`mode=ro` and never write, so they can read a database in a directory they
cannot write to.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from partner_memory.errors import (
    ConfigurationError,
    ConflictError,
    InvalidInputError,
    PartnerMemoryError,
    StorageUnavailableError,
)
from partner_memory.store.sql.base import Cursor, message_key
from partner_memory.store.sql.dialect import SQLITE
from partner_memory.store.sql.group_commit import CommitCounts, GroupCommit
from partner_memory.store.sql.schema import SCHEMA_TABLE
from partner_memory.store.sql.verbs import SqlStore

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
#: Connections one store opens at most: enough for the readers of a busy
#: process (writers take turns anyway), few enough to stay cheap.
POOL_SIZE = 8


class SQLiteStore(SqlStore):
    """A `MemoryStore` in one SQLite file."""

    dialect = SQLITE

    def __init__(
        self,
        path: str | Path,
        *,
        create: bool = True,
        busy_timeout: float = 10.0,
        synchronous: Synchronous = "FULL",
        read_only: bool = False,
    ) -> None:
        self._path = Path(path)
        self.read_only = read_only
        if self._path.is_dir():
            raise ConfigurationError(f"database path {self._path} is a directory, not a file")
        if self._path.exists() and not self._path.is_file():  # a FIFO would block for ever
            raise ConfigurationError(
                f"database path {self._path} is not a regular file (a device, FIFO or socket)"
            )
        if (read_only or not create) and not self._path.exists():
            raise ConfigurationError(f"database file {self._path} does not exist")
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ConfigurationError(f"unknown SQLite synchronous mode {synchronous!r}")
        self._busy_timeout = busy_timeout
        self._synchronous = synchronous
        #: Connections not in a transaction, newest last; at most POOL_SIZE exist.
        self._idle: list[sqlite3.Connection] = []
        self._open = 0
        self._guard = threading.Condition()
        # Writers of this process queue here instead of in SQLite's busy handler
        # (whose sleep-and-retry starves a writer that competes with a busy one),
        # and those that queued together commit together.
        self._group = GroupCommit(
            self._borrow, self._give_back, self._translated, self._synchronous
        )
        self._closed = False
        #: A read-only store that finds no -wal file beside the database leaves, if it
        #: refuses the file, none of the -wal and -shm files its connections made.
        self._sides_made = read_only and not self._side("wal").exists()
        self._refused = False
        self._refuse_foreign()
        try:
            self.open_schema()
        except BaseException:
            self.close()
            raise

    @property
    def url(self) -> str:
        return str(self._path)

    @property
    def path(self) -> Path:
        return self._path

    def _borrow(self) -> sqlite3.Connection:
        """An idle connection, a new one while fewer than POOL_SIZE exist, or the next
        one given back."""
        with self._guard:
            while True:
                if self._closed:
                    raise StorageUnavailableError(f"store {self._path} is closed")
                if self._idle:
                    return self._idle.pop()
                if self._open < POOL_SIZE:
                    self._open += 1
                    break
                self._guard.wait()
        try:
            return self._connect()
        except BaseException:
            with self._guard:
                self._open -= 1
                self._guard.notify()
            raise

    def _give_back(self, conn: sqlite3.Connection) -> None:
        with self._guard:
            if not self._closed:
                self._idle.append(conn)
                self._guard.notify()
                return
            self._open -= 1
        conn.close()

    def _connect(self) -> sqlite3.Connection:
        with self._translated():
            conn = self._open_connection()
            try:
                if not self.read_only:
                    self._use_wal(conn)
                    conn.execute(f"PRAGMA synchronous = {self._synchronous}")
                conn.execute("PRAGMA foreign_keys = ON")
                # deleted text is overwritten with zeros, in the file and its WAL (the
                # default of some builds only: forgetting must not depend on the build)
                conn.execute("PRAGMA secure_delete = ON")
                # the lookup key of a message id, for the migration that adds it
                conn.create_function("pm_id_key", 1, message_key, deterministic=True)
                # a key's glob, tested by the key rule itself, so SQL filters as a key allows
                conn.create_function("pm_glob", 2, fnmatchcase, deterministic=True)
            except BaseException:
                conn.close()
                raise
        return conn

    def _use_wal(self, conn: sqlite3.Connection) -> None:
        """Switch to WAL, waiting up to the busy timeout for other processes.

        SQLite answers BUSY at once, without its busy handler, when this
        connection would have to upgrade its read lock while another holds the
        write lock: processes opening a new file together meet that case.
        """
        deadline = time.monotonic() + self._busy_timeout
        pause = 0.001
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def _open_connection(self) -> sqlite3.Connection:
        if not self.read_only:
            return self._sqlite_connect(self._path, uri=False)
        return self._read_only_connection()

    def _read_only_connection(self) -> sqlite3.Connection:
        uri = f"file:{quote(str(self._path.absolute()))}?mode=ro"
        conn = self._sqlite_connect(uri, uri=True)
        try:
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            # A WAL database whose directory we cannot write to has no -shm file to
            # share; nobody can be writing it then, so read it as immutable.
            conn.close()
            conn = self._sqlite_connect(uri + "&immutable=1", uri=True)
        return conn

    def _sqlite_connect(self, target: str | Path, *, uri: bool) -> sqlite3.Connection:
        return sqlite3.connect(
            target,
            timeout=self._busy_timeout,
            isolation_level=None,
            check_same_thread=False,
            uri=uri,
        )

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Cursor]:
        if write and self.read_only:
            raise ConfigurationError(f"database {self._path} is opened read-only")
        if write:
            # a writer borrows only once it is this process's turn to write, so at
            # most one pooled connection is in a write and readers never queue
            with self._group.write() as cur, self._translated():
                yield cur
            return
        conn = self._borrow()
        try:
            with self._translated():
                conn.execute("BEGIN")
                try:
                    yield conn.cursor()
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
        finally:
            self._give_back(conn)

    @property
    def commit_counts(self) -> CommitCounts:
        """Write transactions committed and writes acknowledged by this store so far."""
        return self._group.counts

    def _lock_schema(self, cur: Cursor) -> None:
        """Nothing to do: the migration's BEGIN IMMEDIATE already holds the write lock."""

    def _refuse_foreign(self) -> None:
        """Look at an existing file before any connection of ours, which would switch it
        to WAL (a writable store) or leave -wal and -shm files beside it (a read-only
        one): another application's database is never given our schema, and a
        read-only store refuses a truncated file or one of another schema version
        without having touched it or its folder."""
        if not self._path.exists() or self._path.stat().st_size == 0:
            return
        with self._translated():
            conn = self._looking_connection()
            try:
                names = [
                    str(r[0])
                    for r in conn.execute(
                        "SELECT name FROM sqlite_master WHERE type = 'table'"
                        " AND name NOT LIKE 'sqlite_%' ORDER BY name"
                    )
                ]
                if self.read_only:
                    self._refuse_unreadable(conn, names)
            finally:
                conn.close()
        if names and SCHEMA_TABLE not in names:
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            raise ConfigurationError(
                f"{self._path} is another application's SQLite database (tables: {shown}):"
                " partner-memory keeps its memory in a file of its own"
            )

    def _looking_connection(self) -> sqlite3.Connection:
        """A connection that changes nothing on disk: with no -wal file beside the
        database no connection is open on it, so it is read as immutable (no lock, no
        -shm); otherwise read-only, as the live database it is."""
        if self._side("wal").exists():
            return self._read_only_connection()
        uri = f"file:{quote(str(self._path.absolute()))}?mode=ro&immutable=1"
        return self._sqlite_connect(uri, uri=True)

    def _refuse_unreadable(self, conn: sqlite3.Connection, names: Sequence[str]) -> None:
        """What a read-only store would refuse later, refused before it leaves a file."""
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        if not self._side("wal").exists() and pages * size > self._path.stat().st_size:
            raise StorageUnavailableError(
                f"{self._path} is not a usable SQLite database: it is truncated"
                f" ({self._path.stat().st_size:,} bytes of {pages * size:,})"
            )
        if SCHEMA_TABLE in names:  # another application's file is refused as such, below
            self._migration_due(self._read_version(conn.cursor()))

    def purge(self) -> list[str]:
        """Deleted text is already zeroed (`secure_delete`); this also empties the WAL,
        whose older frames may still hold pages as they were before a forget."""
        if self.read_only:
            raise ConfigurationError(f"database {self._path} is opened read-only")
        with self._group.alone():
            conn = self._borrow()
            try:
                with self._translated():
                    busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            finally:
                self._give_back(conn)
        if busy:
            raise StorageUnavailableError(
                f"database {self._path}: a reader kept the WAL from being emptied; purge again"
                " when it is idle"
            )
        return ["wal"]

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """Turn sqlite3's errors into the project's tree, naming the file."""
        try:
            yield
        except PartnerMemoryError:
            raise
        except sqlite3.IntegrityError as exc:
            raise ConflictError(f"{self._path}: {exc}") from exc
        except OverflowError as exc:  # an integer no column can hold: bad input
            raise InvalidInputError(f"{self._path}: {exc}") from exc
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "locked" in text or "busy" in text:
                raise StorageUnavailableError(
                    f"database {self._path} is locked by another process"
                    f" (waited {self._busy_timeout:g}s)"
                ) from exc
            raise StorageUnavailableError(f"cannot use database {self._path}: {text}") from exc
        except sqlite3.DatabaseError as exc:
            # the file itself is bad (malformed, not a database), not the call
            self._refused = self._refused or type(exc) is sqlite3.DatabaseError
            raise StorageUnavailableError(
                f"{self._path} is not a usable SQLite database: {exc}"
            ) from exc

    def close(self) -> None:
        """Close idle connections now, and those in a transaction when it ends."""
        with self._guard:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._guard.notify_all()
        for conn in idle:
            conn.close()
        with self._guard:
            done = self._open == 0
        if done and self._refused and self._sides_made:
            self._remove_sides()

    def _side(self, suffix: str) -> Path:
        return Path(f"{self._path}-{suffix}")

    def _remove_sides(self) -> None:
        """The -wal and -shm files a read-only store's connections left beside a file it
        refused (corrupt): nothing was written to them (the WAL is empty), and nobody
        can use the file, so the folder is left as it was found."""
        wal = self._side("wal")
        try:
            if wal.exists() and wal.stat().st_size > 0:
                return  # someone wrote: it is theirs
            wal.unlink(missing_ok=True)
            self._side("shm").unlink(missing_ok=True)
        except OSError:
            return

    @property
    def open_connections(self) -> int:
        """Connections this store holds open (idle or in a transaction)."""
        with self._guard:
            return self._open

    def connection_stats(self) -> dict[str, int]:
        """This process's connections in use and idle, and writers waiting for their turn."""
        with self._guard:
            used, idle = self._open - len(self._idle), len(self._idle)
        return {"used": used, "idle": idle, "waiting": self._group.queued}
