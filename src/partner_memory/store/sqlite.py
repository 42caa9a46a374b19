"""The embedded default backend: one SQLite file in WAL mode.

WAL lets readers run while a writer commits; every write takes the write
lock up front (BEGIN IMMEDIATE) so two writers never deadlock on upgrade.
Each thread gets its own connection, as sqlite3 connections are not meant
to be shared mid-transaction. Read-only stores open the file with
`mode=ro` and never write, so they can read a database in a directory they
cannot write to.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
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
from partner_memory.store.dialect import SQLITE
from partner_memory.store.sql import SqlStore
from partner_memory.store.sql_base import Cursor

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]


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
        if (read_only or not create) and not self._path.exists():
            raise ConfigurationError(f"database file {self._path} does not exist")
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ConfigurationError(f"unknown SQLite synchronous mode {synchronous!r}")
        self._busy_timeout = busy_timeout
        self._synchronous = synchronous
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._guard = threading.Lock()
        # Writers of this process queue here instead of in SQLite's busy handler,
        # whose sleep-and-retry starves a writer that competes with a busy one.
        self._write_lock = threading.Lock()
        self._closed = False
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

    def _connect(self) -> sqlite3.Connection:
        with self._guard:
            if self._closed:
                raise StorageUnavailableError(f"store {self._path} is closed")
            with self._translated():
                conn = self._open_connection()
                try:
                    if not self.read_only:
                        conn.execute("PRAGMA journal_mode = WAL")
                        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
                    conn.execute("PRAGMA foreign_keys = ON")
                except BaseException:
                    conn.close()
                    raise
            self._connections.append(conn)
        return conn

    def _open_connection(self) -> sqlite3.Connection:
        if not self.read_only:
            return self._sqlite_connect(self._path, uri=False)
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

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None or self._closed:
            conn = self._connect()
            self._local.conn = conn
        return conn

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Cursor]:
        if write and self.read_only:
            raise ConfigurationError(f"database {self._path} is opened read-only")
        conn = self._connection()
        with self._write_lock if write else nullcontext(), self._translated():
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn.cursor()
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _lock_schema(self, cur: Cursor) -> None:
        """Nothing to do: the migration's BEGIN IMMEDIATE already holds the write lock."""

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
            raise StorageUnavailableError(
                f"{self._path} is not a usable SQLite database: {exc}"
            ) from exc

    def close(self) -> None:
        with self._guard:
            self._closed = True
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()
