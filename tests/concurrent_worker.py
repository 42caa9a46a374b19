"""A child process for the multi-process test: appends a fixed batch and exits."""

from __future__ import annotations

import sys

from partner_memory.core import MemoryCore
from partner_memory.model import Message
from partner_memory.store import open_store


def main(database: str, worker: str, updates: str) -> None:
    store = open_store(database)
    core = MemoryCore(store, "shared")
    for i in range(int(updates)):
        batch = [Message(role="user", content=f"{worker}:{i}:{j}") for j in range(1 + i % 3)]
        core.update_memory_unit(batch, f"{worker}:{i}")
    store.close()


if __name__ == "__main__":
    main(*sys.argv[1:4])
