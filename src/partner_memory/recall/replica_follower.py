"""Forgets reach every host: a thread that drops this host's recall index copies a
forget, a purge or a reindex elsewhere made stale, whether or not this host searches.

Each host keeps its own copies (`IndexReplicas`). A search compares its copy
with the database first, so it never returns a forgotten message; but a host
that does not search a namespace again would keep the forgotten text in its
files. Every `RecallIndexSettings.follow_s` seconds, and once when the service
starts (before it serves), the follower asks the database for the generation
of each namespace this host holds a copy of and drops the copies built for
another (`IndexReplicas.stale`); the next search rebuilds them. So forgotten
text leaves every host within about one interval.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from partner_memory.recall.replicas import IndexReplicas

log = logging.getLogger(__name__)


class ReplicaFollower:
    """Drops stale index copies every `interval` seconds on a daemon thread."""

    def __init__(
        self,
        replicas: IndexReplicas,
        generation_of: Callable[[str], int | None],
        *,
        interval: float,
    ) -> None:
        self._replicas = replicas
        self._generation_of = generation_of
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def round(self) -> list[str]:
        """One pass: the copies dropped (namespaces, or the directories of unnamed ones)."""
        dropped = self._replicas.stale(self._generation_of)
        if dropped:
            log.info("dropped %d stale recall index copies", len(dropped))
        return dropped

    def start(self) -> None:
        """Catch up now, then follow on a thread (nothing to follow without a home)."""
        if self._replicas.home is None or self._thread is not None:
            return
        self.round()
        self._thread = threading.Thread(target=self._loop, name="pm-replicas", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.round()
            except Exception:  # the database away for a moment: the next round retries
                log.exception("following forgets into this host's recall indexes failed")

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
