"""Concurrent writers on one namespace: real threads, and real processes."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from partner_memory.core import MemoryCore
from partner_memory.model import Message
from partner_memory.store import MemoryStore, open_store
from tests.helpers import assert_unit_consistent, run_in_threads

ROOT = Path(__file__).parent.parent


def _check_writers(core: MemoryCore, writers: int, updates: int) -> None:
    """Each writer's messages are present exactly once, in its own order, slice by slice."""
    seen: dict[str, list[tuple[int, int]]] = defaultdict(list)
    total_slices = 0
    for unit_id in core.unit_ids():
        assert_unit_consistent(core, unit_id)
        for s in core.list_slices(unit_id):
            total_slices += 1
            worker, i = s.summary.split(":")
            contents = [m.content for m in core.read_slice_messages(unit_id, s.id)]
            assert contents == [f"{worker}:{i}:{j}" for j in range(1 + int(i) % 3)]
            seen[worker].append((int(i), len(contents)))
    assert total_slices == writers * updates
    for worker, batches in seen.items():
        assert sorted(batches) == [(i, 1 + i % 3) for i in range(updates)], worker


def test_eight_threads_one_namespace(store: MemoryStore) -> None:
    core = MemoryCore(store, "shared")
    updates = 40

    def write(worker: int) -> None:
        for i in range(updates):
            if worker == 0 and i % 10 == 9:
                core.refresh_memory_session()
            batch = [Message(role="user", content=f"t{worker}:{i}:{j}") for j in range(1 + i % 3)]
            core.update_memory_unit(batch, f"t{worker}:{i}")

    assert run_in_threads(write, 8) == []
    _check_writers(core, 8, updates)


def test_eight_threads_each_with_own_core(store: MemoryStore) -> None:
    MemoryCore(store, "shared")

    def write(worker: int) -> None:
        core = MemoryCore(store, "shared")
        for i in range(25):
            batch = [Message(role="user", content=f"c{worker}:{i}:{j}") for j in range(1 + i % 3)]
            core.update_memory_unit(batch, f"c{worker}:{i}")

    assert run_in_threads(write, 8) == []
    _check_writers(MemoryCore(store, "shared"), 8, 25)


@pytest.mark.slow
def test_four_processes_one_namespace(store_url: str) -> None:
    updates = 30
    open_store(store_url).close()  # migrate once, so the children race on data, not schema
    env_path = f"{ROOT}:{ROOT / 'src'}"
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.concurrent_worker", store_url, f"p{w}", str(updates)],
            cwd=ROOT,
            env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
            stdin=subprocess.DEVNULL,
        )
        for w in range(4)
    ]
    assert [child.wait(timeout=240) for child in children] == [0, 0, 0, 0]
    store = open_store(store_url)
    try:
        _check_writers(MemoryCore(store, "shared"), 4, updates)
    finally:
        store.close()
