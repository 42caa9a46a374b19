"""Eight threads record turns into one namespace while rollings trigger."""

from __future__ import annotations

from collections import defaultdict

from partner_memory.memory import PartnerMemory
from partner_memory.rolling import RollingSettings
from partner_memory.store import MemoryStore
from tests.helpers import run_in_threads


def test_eight_threads_recording_while_rolling(store: MemoryStore) -> None:
    """Every message ends up exactly once, in its thread's order, in units plus the trajectory."""
    settings = RollingSettings(max_messages=24, idle_check_interval_s=0)
    turns_per_thread = 40
    with PartnerMemory(store, "busy", settings=settings) as memory:

        def talk(worker: int) -> None:
            for i in range(turns_per_thread):
                memory.record_turn(f"w{worker} q{i}", f"w{worker} a{i}", source=f"W{worker}")

        failures = run_in_threads(talk, 8)
        memory.wait()
        assert failures == []
        assert memory.rolling.errors == []
        stored = [
            m for unit_id in memory.core.unit_ids() for m in memory.core.read_messages(unit_id)
        ]
        window = memory.trajectory.snapshot()
        stored_ids = {m.id for m in stored}
        everything = stored + [m for m in window if m.id not in stored_ids]
        assert len(stored) == len(stored_ids)  # nothing stored twice
        # rollings ran meanwhile; how many depends on how fast turns are recorded against
        # how long a summary takes (on the in-memory store the threads often finish first)
        assert memory.stats().rollings >= 1
    by_worker: dict[str, list[str]] = defaultdict(list)
    for message in everything:
        body = message.content.split("\n\n", 1)[1]
        by_worker[body.split()[0]].append(body.split()[1])
    assert sorted(by_worker) == [f"w{w}" for w in range(8)]
    for worker, order in by_worker.items():
        expected = [x for i in range(turns_per_thread) for x in (f"q{i}", f"a{i}")]
        assert order == expected, worker
