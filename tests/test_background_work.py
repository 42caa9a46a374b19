"""Background work off the caller's turn, and done once per host, not once per process."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from partner_memory import MemoryService, PartnerMemory, RollingSettings, open_store
from partner_memory.recall.indexer import RECALL_CONSUMER
from partner_memory.rolling.follow_lock import FollowLock
from partner_memory.store.sqlite import SQLiteStore
from tests.conftest import ManualClock
from tests.helpers import Collecting

ROOT = Path(__file__).resolve().parent.parent

HOLD = """
import sys, time
from pathlib import Path
from partner_memory.rolling.follow_lock import FollowLock
lock = FollowLock(Path(sys.argv[1]), sys.argv[2])
assert lock.follows("recall")
print("held", flush=True)
time.sleep(120)
"""


def _turns(memory: PartnerMemory, clock: ManualClock, n: int, tag: str) -> None:
    for i in range(n):
        clock.advance(1000)
        memory.record_turn(f"{tag} question {i}", f"{tag} answer {i}")


def test_the_turn_that_fills_the_window_takes_no_lease(
    sqlite_store: SQLiteStore, manual_clock: ManualClock
) -> None:
    """The count trigger's lease and snapshot are taken on the executor: with the executor
    busy, the turn returns holding nothing, and the rolling, when it runs, covers the
    turns recorded meanwhile too (R13 judged on the window as it then stands)."""
    with PartnerMemory(sqlite_store, "ns", clock=manual_clock, idle_timer=False) as memory:
        gate = threading.Event()
        busy = memory.service.executor.submit(gate.wait)  # its one rolling worker
        _turns(memory, manual_clock, 36, "t")  # the 36th turn fills the window (72)
        assert sqlite_store.rolling_holder("ns") is None
        _turns(memory, manual_clock, 2, "later")
        assert memory.core.unit_ids() == []
        gate.set()
        busy.result(10)
        memory.wait()
        (unit_id,) = memory.core.unit_ids()
        assert memory.core.get_unit_info(unit_id).message_count == 76
        kept = memory.trajectory.snapshot()
        assert len(kept) == 76 // memory.settings.retain_divisor
        assert kept[-1].content.endswith("later answer 1")
        assert memory.rolling.errors == []


def test_one_process_holds_a_consumers_follow_lock_until_it_dies(tmp_path: Path) -> None:
    """Each consumer's lock is held by one process of the host; killed, it is taken over."""
    home, url = tmp_path / "m.db-recall", str(tmp_path / "m.db")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(home), url], cwd=ROOT, stdout=subprocess.PIPE
    )
    mine = FollowLock(home, url)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == b"held"
        assert not mine.follows("recall")
        assert mine.follows("topics")  # a lock per consumer
        assert FollowLock(home, url + "-other").follows("recall")  # and per store
        holder.kill()
        holder.wait()
        assert mine.follows("recall")
        assert mine.follows("recall")  # kept
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
        mine.close()
    assert not mine.follows("recall")  # closed: given back, never taken again


def test_the_process_that_follows_indexes_what_the_others_roll(tmp_path: Path) -> None:
    """Two services on one SQLite file: the first follows the recall indexer, so the
    second's rollings are indexed at the first's next tick, and the second analyses none;
    a consumer only the second registered is followed by the second."""
    database = str(tmp_path / "m.db")
    quiet = RollingSettings(idle_check_interval_s=0, lease_ttl_s=600)  # ticks every 200 s
    with MemoryService(open_store(database), owns_store=True, settings=quiet) as first:
        assert [c.name for c in first.dispatcher.followed()] == [RECALL_CONSUMER]
        with MemoryService(open_store(database), owns_store=True, settings=quiet) as second:
            assert second.dispatcher.followed() == []
            (indexer,) = second.dispatcher.durable
            indexed: list[int] = []
            original = indexer.apply
            indexer.apply = lambda entry: indexed.append(entry.seq) or original(entry)  # type: ignore[method-assign]
            seen = Collecting()
            second.register_consumer(seen).result(10)
            memory = second.memory("ns")
            memory.record_turn("I'm off to Kyoto in April.", "Book early.")
            assert memory.roll_now() is not None
            second.wait()
            assert second.store.lagging_namespaces(RECALL_CONSUMER) == ["ns"]
            first.tick()
            first.wait()
            assert second.store.lagging_namespaces(RECALL_CONSUMER) == []
            assert [e.seq for e in seen.entries] == [1]
            assert indexed == []
            hits = first.memory("ns").recall("Kyoto").hits
            assert [h.message.text for h in hits][:1] == ["I'm off to Kyoto in April."]
