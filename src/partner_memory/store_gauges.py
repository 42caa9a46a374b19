"""A store's health as gauges: read from the database at collection, not counted here.

Consumer lag, windows and leases are the database's figures, so every
process (every worker of `serve`, on any host) reports the same values and
a process that never ran a consumer still shows it falling behind. One
collection reads them once (each gauge asks; the answer is kept a second),
and a store that cannot answer reports nothing rather than failing the
scrape.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from partner_memory.errors import PartnerMemoryError
from partner_memory.store import MemoryStore
from partner_memory.store.contract.capabilities import HealthStore
from partner_memory.telemetry import names as n
from partner_memory.telemetry.instruments import Attributes, observe

log = logging.getLogger(__name__)

Gauges = dict[str, list[tuple[float, Attributes]]]

#: How long one reading serves the gauges of a collection (s).
FRESH_S = 1.0


class StoreGauges:
    """The gauges of one store, read at most once per `FRESH_S`."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._labels: Mapping[str, str] = {n.STORE: store.url}
        self._lock = threading.Lock()
        self._read_at = -FRESH_S
        self._last: Gauges = {}

    def __call__(self) -> Gauges:
        with self._lock:
            if time.monotonic() - self._read_at >= FRESH_S:
                self._last = self._read()
                self._read_at = time.monotonic()
            return self._last

    def _read(self) -> Gauges:
        labels = self._labels
        found: Gauges = {}
        if isinstance(self._store, HealthStore):
            try:
                health = self._store.store_health()
            except PartnerMemoryError as exc:  # the database is away: no figures this time
                log.warning("could not read the store's health: %s", type(exc).__name__)
            else:
                found[n.NAMESPACES] = [(health.namespaces, labels)]
                found[n.WINDOW_MESSAGES] = [(health.window_messages, labels)]
                found[n.WINDOW_LONGEST] = [(health.longest_window, labels)]
                found[n.LEASES] = [
                    (health.leases_held, {**labels, n.LEASE_STATE: "held"}),
                    (health.leases_expired, {**labels, n.LEASE_STATE: "expired"}),
                ]
                found[n.CONSUMER_LAG] = [
                    (rollings, {**labels, n.CONSUMER: name})
                    for name, (rollings, _) in health.consumer_lag.items()
                ]
                found[n.CONSUMER_LAGGING] = [
                    (behind, {**labels, n.CONSUMER: name})
                    for name, (_, behind) in health.consumer_lag.items()
                ]
        stats = getattr(self._store, "connection_stats", None)
        if callable(stats):
            try:
                pool = stats()
            except Exception:  # a closed pool: nothing to report
                pool = None
            if pool is not None:
                found[n.POOL_CONNECTIONS] = [
                    (pool["used"], {**labels, n.CONNECTION_STATE: "used"}),
                    (pool["idle"], {**labels, n.CONNECTION_STATE: "idle"}),
                ]
                found[n.POOL_WAITING] = [(pool["waiting"], labels)]
        return found


def watch(store: MemoryStore) -> Callable[[], None]:
    """Report `store`'s gauges at every collection; call the result to stop."""
    return observe(id(store), StoreGauges(store))
