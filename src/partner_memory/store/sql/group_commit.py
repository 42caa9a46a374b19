"""Group commit: the writers of one process share SQLite transactions.

SQLite has one writer at a time per file, and each commit in WAL mode with
`synchronous=FULL` costs an fsync. Writers that arrive while another holds
the write transaction queue here; when a writer's block is done and others
are queued, it leaves the transaction open and hands it to the next one,
and the last of the chain commits for all of them. Each writer returns only
once the transaction holding its block is durable, so an acknowledged write
is never lost and an unacknowledged one is never half there.

Every block after the first runs inside a savepoint, so a block that fails
undoes only itself; the first block of a transaction needs none, so a lone
writer runs exactly the statements it ran before. Blocks still run one at a
time, in the order they take their turn, on one connection: each sees what
the blocks before it wrote, so counts, triggers and leases stay exact.

A transaction holding only work behind the callers (`store.durability`: a
triggered rolling, its lease, the consumers) commits without the fsync
(`synchronous=NORMAL` for that transaction); the next acknowledged commit's
fsync makes it durable. A block a caller waits for never joins such a
transaction: it commits it first and opens its own.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass

from partner_memory.errors import StorageUnavailableError
from partner_memory.store.sql.durability import awaited
from partner_memory.telemetry.instruments import instruments
from partner_memory.telemetry.names import DB_SYSTEM

_WAIT_LABELS = {DB_SYSTEM: "sqlite"}

#: A transaction is handed on to at most this many blocks...
MAX_BLOCKS = 64
#: ...and not once it has been open this long (s): a chain under constant load
#: still commits, and other processes get the file's write lock in between.
MAX_OPEN_S = 0.02


@dataclass(eq=False)
class _Batch:
    """One open write transaction and the blocks that succeeded in it."""

    conn: sqlite3.Connection
    opened: float
    #: a block in it is acknowledged to a caller: its commit waits for the disk
    awaited: bool = True
    blocks: int = 0
    done: bool = False
    error: BaseException | None = None


@dataclass
class CommitCounts:
    """What a store's writers did: a group commit makes `commits` < `writes`."""

    #: write transactions committed
    commits: int = 0
    #: write blocks acknowledged (each returned after its transaction committed)
    writes: int = 0
    #: commits that waited for the disk (an fsync each with synchronous=FULL); the
    #: others held only work behind the callers, made durable by the next of these
    syncs: int = 0


class GroupCommit:
    """Hands one write transaction from writer to writer, committing once per group."""

    def __init__(
        self,
        borrow: Callable[[], sqlite3.Connection],
        give_back: Callable[[sqlite3.Connection], None],
        translated: Callable[[], AbstractContextManager[None]],
        synchronous: str = "FULL",
    ) -> None:
        self._borrow = borrow
        self._give_back = give_back
        self._translated = translated
        #: the connections' own level: a commit at it waits for the disk
        self._synchronous = synchronous
        #: work behind the callers can commit at NORMAL: it is weaker than their level
        self._relaxable = synchronous in ("FULL", "EXTRA")
        #: connections (by id) left at NORMAL by the last transaction they opened
        self._relaxed: set[int] = set()
        self._cv = threading.Condition()
        #: a writer is running a block (or committing): the others wait their turn
        self._busy = False
        self._waiting = 0
        self._batch: _Batch | None = None
        self._counts = CommitCounts()

    @property
    def counts(self) -> CommitCounts:
        with self._cv:
            return CommitCounts(self._counts.commits, self._counts.writes, self._counts.syncs)

    @property
    def queued(self) -> int:
        """Writers waiting for their turn."""
        with self._cv:
            return self._waiting

    @contextmanager
    def write(self) -> Iterator[sqlite3.Cursor]:
        """A cursor in the shared write transaction; returns once that is committed."""
        batch, first = self._join(awaited())
        try:
            yield batch.conn.cursor()
            if not first:
                with self._translated():
                    batch.conn.execute("RELEASE pm_block")
        except BaseException:
            self._drop_block(batch, first)
            # a failed commit reaches the blocks it held; this one failed on its own
            with suppress(Exception):
                self._end_turn(batch)
            raise
        with self._cv:
            batch.blocks += 1
        if self._end_turn(batch):
            self._wait_for(batch)

    @contextmanager
    def alone(self) -> Iterator[None]:
        """The write turn with no transaction open (what a WAL checkpoint needs)."""
        batch, _ = self._take_turn()
        try:
            if batch is not None:
                self._commit(batch, release=False)
            yield
        finally:
            self._release_turn()

    # -- turns -----------------------------------------------------------------------

    def _take_turn(self) -> tuple[_Batch | None, bool]:
        with self._cv:
            self._waiting += 1
            try:
                while self._busy:
                    self._cv.wait()
            except BaseException:
                self._cv.notify_all()  # a writer that handed on to us commits instead
                raise
            finally:
                self._waiting -= 1
            self._busy = True
            return self._batch, self._batch is None

    def _release_turn(self) -> None:
        with self._cv:
            self._busy = False
            self._cv.notify_all()

    def _join(self, awaited: bool) -> tuple[_Batch, bool]:
        asked = time.perf_counter()
        batch, _ = self._take_turn()
        try:
            if batch is not None and awaited and not batch.awaited:
                self._settle(batch)
                batch = None
            first = batch is None
            if batch is None:
                batch = self._open(awaited)
            else:
                with self._translated():
                    batch.conn.execute("SAVEPOINT pm_block")
        except BaseException:
            if batch is not None:  # the open transaction is in an unknown state: end it
                self._fail(batch, StorageUnavailableError("a savepoint could not be taken"))
            self._release_turn()
            raise
        # the write turn here, and SQLite's own lock (BEGIN IMMEDIATE) across processes
        instruments().store_wait.record(time.perf_counter() - asked, _WAIT_LABELS)
        return batch, first

    def _open(self, awaited: bool) -> _Batch:
        conn = self._borrow()
        try:
            with self._translated():
                self._level(conn, awaited)
                conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._give_back(conn)
            raise
        batch = _Batch(conn, time.monotonic(), awaited or not self._relaxable)
        with self._cv:
            self._batch = batch
        return batch

    def _end_turn(self, batch: _Batch) -> bool:
        """Hand the transaction on or commit it; True when this writer must still wait."""
        with self._cv:
            if batch.done:
                self._busy = False
                self._cv.notify_all()
                return False
            if (
                self._waiting
                and batch.blocks < MAX_BLOCKS
                and time.monotonic() - batch.opened < MAX_OPEN_S
            ):
                self._busy = False
                self._cv.notify_all()
                return True
        self._commit(batch)
        return False

    def _wait_for(self, batch: _Batch) -> None:
        with self._cv:
            while not batch.done:
                if self._batch is batch and not self._busy and not self._waiting:
                    # handed on to a writer that stopped waiting: nobody else will commit
                    self._busy = True
                    break
                self._cv.wait()
            else:
                if batch.error is not None:
                    raise StorageUnavailableError(
                        f"the transaction holding this write did not commit: {batch.error}"
                    ) from batch.error
                return
        self._commit(batch)

    def _level(self, conn: sqlite3.Connection, awaited: bool) -> None:
        """Set the connection's synchronous level for the transaction it is opening (SQLite
        refuses to change it inside one). A connection whose id is reused by a new one
        is at the store's level, so a stale entry only makes a commit wait for the disk
        when it need not."""
        if not self._relaxable:
            return
        key = id(conn)
        if awaited and key in self._relaxed:
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            self._relaxed.discard(key)
        elif not awaited and key not in self._relaxed:
            conn.execute("PRAGMA synchronous = NORMAL")
            self._relaxed.add(key)

    # -- ending a transaction ----------------------------------------------------------

    def _settle(self, batch: _Batch) -> None:
        """Commit a transaction of work behind the callers before a caller's block, which
        must not ride in it; its writers hear how it ended, this one opens its own."""
        with suppress(Exception):
            self._commit(batch, release=False)

    def _commit(self, batch: _Batch, *, release: bool = True) -> None:
        """Commit for every block in the batch (the caller holds the turn)."""
        error: BaseException | None = None
        try:
            with self._translated():
                batch.conn.execute("COMMIT" if batch.blocks else "ROLLBACK")
        except BaseException as exc:
            error = exc
            self._rollback(batch.conn)
        self._close(batch, error, release=release)
        if error is not None:
            raise error

    def _drop_block(self, batch: _Batch, first: bool) -> None:
        """Undo the failed block: the whole transaction if it was the first."""
        conn = batch.conn
        if first:
            self._rollback(conn)
            self._close(batch, None, release=False)
            return
        try:
            conn.execute("ROLLBACK TO pm_block")
            conn.execute("RELEASE pm_block")
            lost = not conn.in_transaction
        except sqlite3.Error:
            lost = True
        if lost:  # SQLite ends the transaction itself on some errors (disk full, I/O)
            self._fail(batch, StorageUnavailableError("SQLite rolled the transaction back"))

    def _fail(self, batch: _Batch, error: BaseException) -> None:
        self._rollback(batch.conn)
        self._close(batch, error, release=False)

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the connection ended the transaction itself

    def _close(self, batch: _Batch, error: BaseException | None, *, release: bool) -> None:
        with self._cv:
            batch.done = True
            batch.error = error
            if self._batch is batch:
                self._batch = None
            if error is None and batch.blocks:
                self._counts.commits += 1
                self._counts.writes += batch.blocks
                if batch.awaited and self._relaxable:
                    self._counts.syncs += 1
            if release:
                self._busy = False
            self._cv.notify_all()
        self._give_back(batch.conn)
