"""MemoryService: many namespaces, constant threads; the idle scheduler; the async API."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from partner_memory import (
    Capability,
    ConfigurationError,
    MemoryService,
    RollingResult,
    RollingSettings,
)
from partner_memory.aio import AsyncMemoryService, AsyncPartnerMemory
from partner_memory.store import MemoryStore
from partner_memory.store.sql.dialect import POSTGRESQL, SQLITE
from tests.conftest import ManualClock

HOUR = 3_600_000


def test_threads_stay_constant_in_the_number_of_namespaces(store: MemoryStore) -> None:
    """Handles own no thread: a service runs a scheduler, a consumer thread, its workers
    and the follower of this host's index copies."""
    settings = RollingSettings(max_messages=4, idle_check_interval_s=5)
    before = threading.active_count()
    with MemoryService(store, settings=settings, rolling_workers=2) as service:
        for i in range(300):
            memory = service.memory(f"ns-{i}")
            memory.record_turn("q", "a")
            memory.record_turn("q", "a")  # a count rolling in each
        service.wait()
        assert threading.active_count() <= before + 1 + 1 + 2 + 1
        assert len(service.namespaces_open()) == 300
        assert service.memory("ns-7") is service.memory("ns-7")
        assert service.memory("ns-7").stats().rollings == 1


def test_one_scheduler_rolls_every_quiet_namespace(
    store: MemoryStore, manual_clock: ManualClock
) -> None:
    """R14 from the database: one scheduler round finds each quiet namespace, once."""
    settings = RollingSettings(idle_check_interval_s=3600)
    with MemoryService(store, settings=settings, clock=manual_clock) as service:
        for name in ("a", "b", "c"):
            service.memory(name).record_turn(f"hello from {name}", "hi")
        manual_clock.advance(HOUR // 2)
        service.memory("c").record_turn("still here", "yes")
        assert service.tick() == []
        manual_clock.advance(HOUR // 2 + 1)
        started = service.tick()
        results = [f.result(10) for f in started]
        assert sorted(
            r.memory_unit.id == service.memory(n).core.unit_ids()[0]
            for r, n in zip(results, ("a", "b"), strict=True)
        ) == [True, True]
        assert service.tick() == []  # once per quiet period
        assert service.memory("c").core.unit_ids() == []
        manual_clock.advance(HOUR // 2)
        assert len(service.tick()) == 1


def test_unwatched_namespaces_are_left_alone(store: MemoryStore, manual_clock: ManualClock) -> None:
    """A service rolls only namespaces it serves (a replay beside a live agent stays whole)."""
    settings = RollingSettings(idle_check_interval_s=3600)
    with MemoryService(store, settings=settings, clock=manual_clock) as service:
        service.memory("replay", watch_idle=False).record_turn("old", "words")
        manual_clock.advance(2 * HOUR)
        assert service.tick() == []


def test_closed_service_refuses_new_handles(store: MemoryStore) -> None:
    service = MemoryService(store)
    service.close()
    with pytest.raises(ConfigurationError, match="closed"):
        service.memory("x")


def test_async_api_wraps_the_same_memory(store: MemoryStore) -> None:
    """aio: awaited calls, awaitable rolling results, coroutine consumers on the loop."""

    async def main() -> None:
        settings = RollingSettings(idle_check_interval_s=0)
        async with AsyncMemoryService(MemoryService(store, settings=settings)) as service:
            memory: AsyncPartnerMemory = await service.memory("agent")
            seen: list[tuple[str, bool]] = []
            loop = asyncio.get_running_loop()

            async def on_rolling(result: RollingResult) -> None:
                seen.append((result.memory_slice.id, asyncio.get_running_loop() is loop))

            assert memory.register_after_rolling(on_rolling)
            assert not memory.register_after_rolling(on_rolling)
            await memory.record_turn("I'm off to Kyoto in April.", "Book early.")
            result = await memory.roll_now()
            assert result is not None
            await memory.wait()
            assert seen == [(result.memory_slice.id, True)]
            assert "Kyoto" in await memory.context_xml()
            assert (await memory.stats()).rollings == 1
            # the forgets, awaited
            turn = await memory.record_turn("My cat is Luna", "Noted")
            assert await memory.forget_messages([turn.user.id]) == 1
            unit, found = result.memory_unit.id, result.memory_slice.id
            assert await memory.forget_slice(unit, found) == 2
            await memory.forget_unit(unit)
            await memory.forget_all()
            assert await memory.window() == []
            assert await memory.context_xml() == ""

    asyncio.run(main())


def test_async_idle_check_awaits_the_rolling(store: MemoryStore, manual_clock: ManualClock) -> None:
    async def main() -> None:
        settings = RollingSettings(idle_check_interval_s=0)
        service = AsyncMemoryService(MemoryService(store, settings=settings, clock=manual_clock))
        memory = await service.memory("agent")
        await memory.record_turn("a", "b")
        assert await memory.check_idle() is None
        manual_clock.advance(HOUR + 1)
        result = await memory.check_idle()
        assert result is not None
        assert result.idle
        await service.close()

    asyncio.run(main())


def test_capabilities_are_declared(store: MemoryStore) -> None:
    """A backend names its optional features; the contract suite skips what is absent."""
    assert isinstance(store.capabilities, frozenset)
    assert all(isinstance(c, Capability) for c in store.capabilities)


@pytest.mark.capability(Capability.SHARED_ACROSS_HOSTS)
def test_capability_marker_skips_backends_without_it(store: MemoryStore) -> None:
    assert Capability.SHARED_ACROSS_HOSTS in store.capabilities


def test_dialect_placeholders_leave_literals_alone() -> None:
    query = "SELECT '?', \"a?\" FROM t WHERE x = ? AND y LIKE '%?%' AND z = ?"
    assert POSTGRESQL.sql(query) == (
        "SELECT '?', \"a?\" FROM t WHERE x = %s AND y LIKE '%%?%%' AND z = %s"
    )
    assert SQLITE.sql(query) == query


def test_lease_is_exclusive_and_expires(store: MemoryStore) -> None:
    store.ensure_namespace("ns", "s")
    assert store.begin_rolling("ns", "one", ttl_ms=60_000) is not None
    assert store.begin_rolling("ns", "two", ttl_ms=60_000) is None
    assert store.rolling_holder("ns") == "one"
    store.release_rolling("ns", "two")  # not the holder: nothing happens
    assert store.rolling_holder("ns") == "one"
    store.release_rolling("ns", "one")
    assert store.begin_rolling("ns", "two", ttl_ms=1) is not None
    time.sleep(0.05)
    assert store.rolling_holder("ns") is None  # lapsed
    assert store.begin_rolling("ns", "three", ttl_ms=60_000) is not None


class SlowSummarizer:
    name = "slow"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def summarize(self, messages: object, meter: object) -> str:
        time.sleep(self.seconds)
        return "a slow summary"


def test_lease_is_renewed_while_a_long_rolling_runs(store: MemoryStore) -> None:
    """A rolling longer than the lease keeps it: the scheduler renews what it holds."""
    slow = RollingSettings(idle_check_interval_s=0, lease_ttl_s=1.0)
    with (
        MemoryService(store, settings=slow, summarizers=[SlowSummarizer(3.5)]) as first,
        MemoryService(store, settings=slow) as second,
    ):
        a, b = first.memory("ns"), second.memory("ns")
        a.record_turn("q", "a")
        future = a.rolling.trigger(idle=False)
        assert future is not None
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:  # well past the lease's 1 s
            assert b.rolling.trigger(idle=False) is None
            time.sleep(0.1)
        assert future.result(10) is not None
        assert a.rolling.errors == []
        assert store.rolling_holder("ns") is None  # the commit gave it back


def test_a_lost_lease_abandons_the_rolling(store: MemoryStore) -> None:
    """If the lease lapsed and another process took it, the late commit stores nothing."""
    settings = RollingSettings(idle_check_interval_s=0)
    with MemoryService(store, settings=settings, summarizers=[SlowSummarizer(0.5)]) as service:
        memory = service.memory("ns")
        memory.record_turn("q", "a")
        future = memory.rolling.trigger(idle=False)
        assert future is not None
        store.release_rolling("ns", service.leases.holder)  # as if it had lapsed...
        assert store.begin_rolling("ns", "someone-else", ttl_ms=60_000) is not None  # ...and gone
        with pytest.raises(Exception, match="lease of namespace 'ns' was lost"):
            future.result(10)
        assert memory.core.unit_ids() == []
        assert len(memory.trajectory) == 2
        assert len(memory.rolling.errors) == 1


def test_open_from_settings(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """MemoryService.open and PartnerMemory.open read PARTNER_MEMORY_DB and _NAMESPACE."""
    from pathlib import Path

    from partner_memory import PartnerMemory

    database = Path(str(tmp_path)) / "env.db"
    monkeypatch.setenv("PARTNER_MEMORY_DB", str(database))
    monkeypatch.setenv("PARTNER_MEMORY_NAMESPACE", "from-env")
    for name in ("BASE_URL", "MODEL"):
        monkeypatch.delenv(f"PARTNER_MEMORY_LLM_{name}", raising=False)
    with PartnerMemory.open(idle_timer=False) as memory:
        assert memory.namespace == "from-env"
        memory.record_turn("hello", "hi")
    with MemoryService.open(idle_timer=False) as service:
        assert len(service.memory("from-env").trajectory) == 2
    assert database.exists()


def test_durable_consumer_through_a_handle(store: MemoryStore) -> None:
    """A handle passes a durable consumer to its service (registered once)."""
    from partner_memory import LogEntry, PartnerMemory

    class Titles:
        name = "titles"

        def __init__(self) -> None:
            self.seen: list[int] = []

        def apply(self, entry: LogEntry) -> list[object]:
            self.seen.append(entry.seq)
            return []

    consumer = Titles()
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        assert memory.register_after_rolling(consumer)
        assert not memory.register_after_rolling(consumer)
        memory.record_turn("a", "b")
        memory.roll_now()
        memory.wait()
    assert consumer.seen == [1]


def test_async_open_and_service_consumer(tmp_path: object) -> None:
    from pathlib import Path

    from partner_memory import LogEntry

    class Count:
        name = "count"
        entries = 0

        def apply(self, entry: LogEntry) -> list[object]:
            self.entries += 1
            return []

    async def main() -> None:
        database = Path(str(tmp_path)) / "aio.db"
        memory = await AsyncPartnerMemory.open(database, "agent", idle_timer=False, llm=None)
        assert memory.namespace == "agent"
        await memory.record_messages([])
        await memory.record_turn("a", "b")
        assert (await memory.roll_now()) is not None
        await memory.close()
        service = await AsyncMemoryService.open(database, idle_timer=False, llm=None)
        consumer = Count()
        await service.register_consumer(consumer)
        assert consumer.entries == 1
        await service.wait()
        await service.close()

    asyncio.run(main())


def test_only_a_dead_holder_in_this_process_space_is_taken_over() -> None:
    import os
    import socket
    import subprocess
    import sys

    from partner_memory.rolling.lease import holder_is_dead, process_space

    host, space = socket.gethostname(), process_space()
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    gone = int(child.stdout)
    assert holder_is_dead(f"{host}:{gone}:{space}:x")
    assert not holder_is_dead(f"{host}:{os.getpid()}:{space}:x")  # ourselves
    assert not holder_is_dead(f"{host}:{gone}:another-space:x")  # a container with our name
    assert not holder_is_dead(f"elsewhere:{gone}:{space}:x")
    assert not holder_is_dead("not a holder")
