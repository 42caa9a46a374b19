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
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass

from partner_memory.errors import StorageUnavailableError
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
    blocks: int = 0
    done: bool = False
    error: BaseException | None = None


@dataclass
class CommitCounts:
    """What a store's writers did: a group commit makes `commits` < `writes`."""

    #: write transactions committed (one fsync each with synchronous=FULL)
    commits: int = 0
    #: write blocks acknowledged (each returned after its transaction committed)
    writes: int = 0


class GroupCommit:
    """Hands one write transaction from writer to writer, committing once per group."""

    def __init__(
        self,
        borrow: Callable[[], sqlite3.Connection],
        give_back: Callable[[sqlite3.Connection], None],
        translated: Callable[[], AbstractContextManager[None]],
    ) -> None:
        self._borrow = borrow
        self._give_back = give_back
        self._translated = translated
        self._cv = threading.Condition()
        #: a writer is running a block (or committing): the others wait their turn
        self._busy = False
        self._waiting = 0
        self._batch: _Batch | None = None
        self._counts = CommitCounts()

    @property
    def counts(self) -> CommitCounts:
        with self._cv:
            return CommitCounts(self._counts.commits, self._counts.writes)

    @property
    def queued(self) -> int:
        """Writers waiting for their turn."""
        with self._cv:
            return self._waiting

    @contextmanager
    def write(self) -> Iterator[sqlite3.Cursor]:
        """A cursor in the shared write transaction; returns once that is committed."""
        batch, first = self._join()
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

    def _join(self) -> tuple[_Batch, bool]:
        asked = time.perf_counter()
        batch, first = self._take_turn()
        try:
            if batch is None:
                batch = self._open()
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

    def _open(self) -> _Batch:
        conn = self._borrow()
        try:
            with self._translated():
                conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._give_back(conn)
            raise
        batch = _Batch(conn, time.monotonic())
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

    # -- ending a transaction ----------------------------------------------------------

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
            if release:
                self._busy = False
            self._cv.notify_all()
        self._give_back(batch.conn)
