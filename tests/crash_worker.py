"""A child process for the crash tests: writes until it is killed.

Each update that returned is acknowledged on stdout, flushed, so the parent
knows exactly which writes the store promised to keep.
"""

from __future__ import annotations

import sys

from partner_memory.core import MemoryCore
from partner_memory.model import Message
from partner_memory.store import open_store


def main(database: str, namespace: str, tag: str) -> None:
    store = open_store(database)
    core = MemoryCore(store, namespace)
    print("ready", flush=True)
    for i in range(1_000_000):
        if i % 7 == 6:
            core.refresh_memory_session()
        size = 1 + i % 5
        batch = [
            Message(role="user", content=f"{tag}-{i}-{j} " + "x" * (j * 300)) for j in range(size)
        ]
        update = core.update_memory_unit(batch, f"{tag}-{i}")
        print(f"{update.unit.id} {update.slice.id} {tag}-{i} {size}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
