"""A child process for the durable-consumer crash test: records turns until it is killed.

Rollings are frequent (every three turns) and a durable consumer writes one
row per rolling it processes, slowly, so kills land before, inside and
after its transactions.
"""

from __future__ import annotations

import sys
import time

from partner_memory import (
    LogEntry,
    LogTransaction,
    MemoryService,
    Message,
    RollingSettings,
    open_store,
)


class SeenRollings:
    """Writes (namespace, seq) of every rolling it processes: twice would show as two rows."""

    name = "seen-rollings"

    def setup(self, tx: LogTransaction) -> None:
        tx.execute(
            "CREATE TABLE IF NOT EXISTS seen_rollings (namespace TEXT NOT NULL, seq BIGINT NOT NULL)"
        )

    def apply(self, tx: LogTransaction, entry: LogEntry) -> None:
        tx.execute(
            "INSERT INTO seen_rollings (namespace, seq) VALUES (?, ?)", (entry.namespace, entry.seq)
        )
        time.sleep(0.003)


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
