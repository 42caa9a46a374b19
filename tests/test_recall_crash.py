"""A process killed after a rolling committed and before its recall rows did: the index is
late, never wrong - a search meanwhile reads the rolling from the log, and the next
service's indexer writes the rows exactly once."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from partner_memory import MemoryService, RollingSettings, open_store
from partner_memory.recall.engine import RecallEngine
from partner_memory.recall.indexer import RECALL_CONSUMER
from partner_memory.store.contract.base import UnitQuery

ROOT = Path(__file__).resolve().parent.parent


def _found(engine: RecallEngine, query: str) -> list[tuple[str | None, int | None, str]]:
    hits = engine.recall("ns", query, k=3).hits
    return [(h.unit_id, h.position, h.message.content) for h in hits]


def test_sigkill_between_rolling_and_indexing_only_delays_the_index(store_url: str) -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.recall_worker", store_url],
        cwd=ROOT,
        stdout=subprocess.PIPE,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == b"rolled"
    time.sleep(0.5)  # the indexer is inside its transaction, pausing
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stdout.close()
    store = open_store(store_url)
    try:
        state = store.recall_state("ns", RECALL_CONSUMER)
        assert (state.indexed, state.head) == (0, 1)  # rolled, not indexed
        assert store.recall_rows("ns", -1, state.head) == []
        query = "where did Ana move"
        before = _found(RecallEngine(store), query)
        assert before[0][2] == "My sister Ana moved to Lisbon in spring"
        assert before[0][0] is not None  # stored in a unit, read from the log
        settings = RollingSettings(idle_check_interval_s=0)
        with MemoryService(store, settings=settings) as service:
            service.catch_up()
        state = store.recall_state("ns", RECALL_CONSUMER)
        assert state.indexed == state.head == 1
        rows = store.recall_rows("ns", -1, state.head)
        (unit,) = store.list_units("ns", UnitQuery(limit=10))
        assert sorted(r.position for r in rows) == list(range(unit.message_count))
        assert _found(RecallEngine(store), query) == before
    finally:
        store.close()
