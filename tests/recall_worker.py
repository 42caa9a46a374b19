"""A child process for the recall crash test: rolls, then is killed while indexing.

Its recall indexer takes its time (a pause inside the indexing transaction),
so the kill lands after the rolling committed and before its recall rows did.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from partner_memory import LogEntry, MemoryService, Message, open_store
from partner_memory.recall.indexer import RecallIndexer
from partner_memory.store import Staged

_apply = RecallIndexer.apply


def _slow_apply(self: RecallIndexer, entry: LogEntry) -> Sequence[Staged]:
    staged = _apply(self, entry)
    time.sleep(60)  # killed here, inside the transaction: its rows are never committed
    return staged


def main(database: str) -> None:
    RecallIndexer.apply = _slow_apply  # type: ignore[method-assign]
    service = MemoryService(open_store(database), owns_store=True)
    memory = service.memory("ns")
    memory.record_messages(
        [
            Message("user", "My sister Ana moved to Lisbon in spring"),
            Message("assistant", "Lisbon is lovely; does she like the hills?"),
            Message("user", "She walks them every day with her dog Bolo"),
        ]
    )
    memory.roll_now()
    while service.store.log_head("ns") < 1:
        time.sleep(0.01)
    print("rolled", flush=True)
    time.sleep(120)


if __name__ == "__main__":
    main(sys.argv[1])
