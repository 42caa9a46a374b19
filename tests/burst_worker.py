"""A child process of the session-boundary test: talks in bursts on a shared namespace.

Bursts are `gap_ms` apart on the worker's clock; between bursts the workers wait
for each other (a file per worker and burst), so every burst's turns come after
every earlier burst's, and the quiet between them is real on the clock - with no
idle check running anywhere. Usage: DB WORKER WORKERS BURSTS TURNS GAP_MS DIR
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from partner_memory import PartnerMemory, RollingSettings
from partner_memory.store import MemoryStore, open_store

START = 1_700_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> int:
        return self.now


def main(
    database: str, worker: str, workers: str, bursts: str, turns: str, gap: str, where: str
) -> None:
    clock, folder = Clock(), Path(where)
    settings = RollingSettings(max_messages=8, idle_check_interval_s=0)
    store = open_store(database)
    try:
        talk(
            store, clock, settings, worker, int(workers), int(bursts), int(turns), int(gap), folder
        )
    finally:
        store.close()


def talk(
    store: MemoryStore,
    clock: Clock,
    settings: RollingSettings,
    worker: str,
    workers: int,
    bursts: int,
    turns: int,
    gap: int,
    folder: Path,
) -> None:
    with PartnerMemory(store, "shared", clock=clock, settings=settings) as memory:
        for burst in range(bursts):
            for turn in range(turns):
                clock.now = START + burst * gap + turn * 1000
                memory.record_turn(f"{worker} b{burst} t{turn}", f"ok {worker} b{burst} t{turn}")
            memory.wait()
            (folder / f"{worker}-{burst}").touch()
            others = [folder / f"w{w}-{burst}" for w in range(workers)]
            while not all(p.exists() for p in others):
                time.sleep(0.01)


if __name__ == "__main__":
    main(*sys.argv[1:8])
