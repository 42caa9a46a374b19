"""Background work off the caller's turn."""

from __future__ import annotations

import threading

from partner_memory import PartnerMemory
from partner_memory.store.sqlite import SQLiteStore
from tests.conftest import ManualClock


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
