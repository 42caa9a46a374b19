"""Many memory handles over one store: connections, descriptors and threads stay bounded."""

from __future__ import annotations

import os
import threading

from partner_memory import Message, PartnerMemory, RollingSettings
from partner_memory.store import MemoryStore

CYCLES = 300


def _descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_open_roll_close_cycles_leak_nothing(sql_store: MemoryStore) -> None:
    """Each cycle is a service of one: its own rolling threads, which die at close; the
    connections they used go back to the store's pool instead of piling up."""
    store = sql_store

    def cycle(i: int) -> None:
        settings = RollingSettings(max_messages=4)
        with PartnerMemory(store, f"ns-{i % 7}", settings=settings, idle_timer=False) as memory:
            turn = [Message("user", f"m{i}"), Message("assistant", f"r{i}")]
            memory.record_messages(turn)
            memory.record_messages([Message("user", f"n{i}"), Message("assistant", f"s{i}")])
            memory.wait()  # the count trigger rolled on the service's executor thread

    def connections() -> int:
        return int(getattr(store, "open_connections", 0))

    for i in range(20):  # warm up: the pool fills to what the work needs
        cycle(i)
    # a pool may still grow on demand (PostgreSQL's does, under load): its connections are
    # counted by the pool and set apart, so only what nothing accounts for looks like a leak
    descriptors, threads = _descriptors() - connections(), threading.active_count()
    for i in range(CYCLES):
        cycle(i)
    assert _descriptors() - connections() <= descriptors + 2
    assert threading.active_count() <= threads
    if store.dialect.name == "sqlite":  # type: ignore[attr-defined]
        from partner_memory.store.sqlite import POOL_SIZE

        assert connections() <= POOL_SIZE
    else:
        from partner_memory.store.postgres import PostgresStore

        assert isinstance(store, PostgresStore)
        assert connections() <= store._pool.max_size
