"""This process's rolling leases (R15 across processes).

A rolling runs only under its namespace's lease, a row in the database that
expires unless renewed; a killed process's lease lapses on its own. One
holder id per service; the service's scheduler renews what it holds. The
holder id names the host, the process and the process-id space (boot and
pid namespace, so containers sharing a hostname are told apart), so a
process in the same space takes over at once a lease whose holder is known
to be dead, instead of waiting for it to lapse.

A lease is acknowledged to nobody: lost, it lapses or is taken again, so its
writes commit without waiting for the disk (`store.durability`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable

from partner_memory.errors import PartnerMemoryError
from partner_memory.model import TrajectoryState
from partner_memory.store.contract.base import MemoryStore
from partner_memory.store.sql.durability import behind_the_caller
from partner_memory.telemetry.instruments import instruments, span
from partner_memory.telemetry.names import HOLDER, LEASE_TAKEOVER_SPAN, MEMORY_NAMESPACE

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Takes, remembers, renews and gives back the rolling leases of one service."""

    def __init__(
        self, store: MemoryStore, ttl_s: float, *, on_acquire: Callable[[], None] | None = None
    ) -> None:
        self._store = store
        #: called when a lease is taken: whoever renews leases must be running
        self._on_acquire = on_acquire
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{process_space()}:{uuid.uuid4()}"
        self.ttl_ms = max(1, int(ttl_s * 1000))
        self._held: set[str] = set()
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        with self._lock:
            return len(self._held)

    def try_acquire(self, namespace: str, *, peek: bool = False) -> TrajectoryState | None:
        """The lease and a snapshot of the window, or None if another holder has it.

        With `peek`, a plain read first finds a live holder, so triggers that
        fire on every turn while a rolling runs do not queue on the lease's row.
        """
        with behind_the_caller():
            state = self._taken(namespace, peek)
        if state is not None:
            with self._lock:
                self._held.add(namespace)
            if self._on_acquire is not None:
                self._on_acquire()
        return state

    def _taken(self, namespace: str, peek: bool) -> TrajectoryState | None:
        current = self._store.rolling_holder(namespace) if peek else None
        if current is not None and not holder_is_dead(current):
            return None
        state = self._store.begin_rolling(namespace, self.holder, ttl_ms=self.ttl_ms)
        if state is None:
            current = self._store.rolling_holder(namespace)
            if current is not None and holder_is_dead(current):
                attributes = {MEMORY_NAMESPACE: namespace, HOLDER: current}
                with span(LEASE_TAKEOVER_SPAN, attributes):
                    state = self._store.begin_rolling(
                        namespace, self.holder, ttl_ms=self.ttl_ms, replacing=current
                    )
                if state is not None:
                    instruments().lease_takeovers.add(1)
                    log.info(
                        "took over the rolling lease of %r from dead %s",
                        namespace,
                        current,
                        extra={"event": "lease_takeover", "namespace": namespace, "from": current},
                    )
        return state

    def acquire(self, namespace: str) -> TrajectoryState:
        """Wait for the lease: a rolling elsewhere finishes, or its lease lapses."""
        pause = 0.01
        while True:
            state = self.try_acquire(namespace)
            if state is not None:
                return state
            time.sleep(pause)
            pause = min(pause * 2, 0.25)

    def committed(self, namespace: str) -> None:
        """The commit released the lease in the database."""
        with self._lock:
            self._held.discard(namespace)

    def release(self, namespace: str) -> None:
        """Give the lease back if still held; a failure only delays others until it lapses."""
        with self._lock:
            if namespace not in self._held:
                return
            self._held.discard(namespace)
        try:
            with behind_the_caller():
                self._store.release_rolling(namespace, self.holder)
        except PartnerMemoryError as exc:
            log.warning("could not release the rolling lease of %r: %s", namespace, exc)

    def renew(self) -> None:
        if self.held:
            with behind_the_caller():
                self._store.renew_leases(self.holder, ttl_ms=self.ttl_ms)


def process_space() -> str:
    """Where a pid means the same process: this boot of the kernel and this pid namespace."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as boot:
            boot_id = boot.read().strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:  # no /proc: never judge another process dead
        return f"unknown-{uuid.uuid4()}"
    return f"{boot_id}-{namespace}"


def holder_is_dead(holder: str) -> bool:
    """True only for a holder in this process space whose process no longer exists."""
    parts = holder.split(":")
    if len(parts) != 4 or not parts[1].isdigit():
        return False
    host, pid_text, space, _ = parts
    if host != socket.gethostname() or space != process_space():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, someone else's
        return False
    return _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    """A killed child not yet reaped still has a pid; its lease is dead all the same."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False
