"""A writer process for the failover tests: records turns into one namespace until its
stop file appears, retrying while no server accepts writes, and prints the id of each
turn the store acknowledged ("ack ID") as soon as it is acknowledged."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from partner_memory import MemoryService, RollingSettings, open_store
from partner_memory.errors import StorageUnavailableError
from tests.consumer_worker import SeenRollings


def main(database: str, namespace: str, stop: str, tag: str) -> None:
    settings = RollingSettings(max_messages=6, idle_check_interval_s=0, lease_ttl_s=2)
    service = MemoryService(open_store(database), settings=settings, owns_store=True)
    service.register_consumer(SeenRollings())
    memory = service.memory(namespace)
    print("ready", flush=True)
    n = 0
    while not Path(stop).exists():
        try:
            turn = memory.record_turn(f"{tag} question {n}", f"{tag} answer {n}")
        except StorageUnavailableError:
            time.sleep(0.1)  # no server accepts writes yet: the standby is being promoted
            continue
        print(f"ack {turn.user.id} {turn.assistant.id}", flush=True)
        n += 1
    service.close()


if __name__ == "__main__":
    main(*sys.argv[1:5])
