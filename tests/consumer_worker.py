"""A child process for the durable-consumer crash test: records turns until it is killed.

Rollings are frequent (every three turns) and a durable consumer writes one
record per rolling it processes, slowly, so kills land before, inside and
after its transactions.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from uuid import uuid4

from partner_memory import (
    LogEntry,
    MemoryService,
    Message,
    Record,
    RollingSettings,
    open_store,
)
from partner_memory.store import Staged


class SeenRollings:
    """Records the seq of every rolling it processes, under a key of its own each time:
    a rolling processed twice would show as two records."""

    name = "seen-rollings"

    def apply(self, entry: LogEntry) -> Sequence[Staged]:
        time.sleep(0.003)
        return [Record(f"{entry.seq:09d}-{uuid4().hex}", entry.seq)]


def main(database: str, turns: str) -> None:
    settings = RollingSettings(max_messages=6, idle_check_interval_s=0, lease_ttl_s=5)
    service = MemoryService(open_store(database), settings=settings, owns_store=True)
    memory = service.memory("ns")
    service.register_consumer(SeenRollings())
    # the recall indexer's model and analysers load on first use: before the kills, so
    # that these land while turns are recorded, not while a process starts
    service.analysis.rows([Message("user", "warm up")])
    print("ready", flush=True)
    for i in range(int(turns)):
        memory.record_turn(f"question {i}", f"answer {i}")
    service.close()


if __name__ == "__main__":
    main(*sys.argv[1:3])
