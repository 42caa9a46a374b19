"""One process per host follows the log for each durable consumer of a store.

Every process serving a store registers the same durable consumers (the
recall indexer, at least). Had each of them followed every namespace's log,
each rolling would be analysed once per process, all but one of the writes
refused (`advance_consumer`), and each process would start its own analysis
worker: eight processes on one SQLite file spent most of their CPU so. So a
process follows a consumer only while it holds that consumer's lock, an
exclusive `flock` on a file in this host's index directory for the store.
The kernel releases it when the holder exits or is killed, and another
process takes it at its next try (its next rolling, or its scheduler's next
tick), so a crash delays the following, never stops it.

The lock only saves work; it decides nothing. The consumer's position in the
database stays the authority: two followers (two hosts of a PostgreSQL
store, or a lock that could not be taken) are kept exact by
`advance_consumer`, as before. A process that does not follow still sees
every rolling in recall, which reads what the index lacks from the log.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import threading
from pathlib import Path

log = logging.getLogger(__name__)


class FollowLock:
    """This process's hold on the follow locks of one store's consumers, by name."""

    def __init__(self, home: Path | None, store_url: str) -> None:
        #: None: the indexes are in memory, one process: always follow
        self._home = home
        self._store = store_url
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()
        self._closed = False

    def follows(self, consumer: str) -> bool:
        """Whether this process follows `consumer`: it holds the lock, or takes it now.

        A lock that cannot be taken for another reason than another holder (a
        read-only directory) means follow: costlier, never wrong.
        """
        if self._home is None:
            return True
        with self._lock:
            if self._closed:
                return False
            if consumer in self._held:
                return True
            try:
                fd = self._open(consumer)
            except OSError as exc:
                log.warning("cannot take the follow lock of %s: %s", consumer, exc)
                return True
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            except OSError as exc:
                os.close(fd)
                log.warning("cannot take the follow lock of %s: %s", consumer, exc)
                return True
            self._held[consumer] = fd
            return True

    def _open(self, consumer: str) -> int:
        assert self._home is not None
        self._home.mkdir(parents=True, exist_ok=True)
        key = hashlib.sha256(f"{self._store}\0{consumer}".encode()).hexdigest()[:16]
        return os.open(self._home / f"follow-{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)

    def close(self) -> None:
        """Give every lock back (another process takes each at its next try)."""
        with self._lock:
            self._closed = True
            held, self._held = self._held, {}
        for fd in held.values():
            with contextlib.suppress(OSError):
                os.close(fd)  # closing the only descriptor releases the flock
