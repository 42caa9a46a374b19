"""A child process of the group-commit crash test: threads record turns until killed.

Each thread records on one of two shared namespaces (rolling every few turns)
and appends the ids of every acknowledged turn to its own file, flushed, so
the parent knows what the store promised to keep.
Usage: DB TAG THREADS ACK_DIR
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from partner_memory import MemoryService, RollingSettings
from partner_memory.store import open_store


def main(database: str, tag: str, threads: str, ack_dir: str) -> None:
    settings = RollingSettings(max_messages=8, idle_check_interval_s=0)
    service = MemoryService(open_store(database), settings=settings, owns_store=True)

    def talk(worker: int) -> None:
        memory = service.memory(f"shared-{worker % 2}")
        name = f"{tag}-t{worker}"
        with open(Path(ack_dir) / f"{name}.acks", "a", encoding="utf-8") as acks:
            for seq in range(1_000_000):
                turn = memory.record_turn(f"{name} {seq}", f"{name} {seq} ok")
                acks.write(f"{turn.user.id} {turn.assistant.id}\n")
                acks.flush()

    workers = [threading.Thread(target=talk, args=(w,), daemon=True) for w in range(int(threads))]
    for worker in workers:
        worker.start()
    print("ready", flush=True)
    for worker in workers:
        worker.join()


if __name__ == "__main__":
    main(*sys.argv[1:5])
