"""Crash safety with real processes killed by SIGKILL at random points."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from partner_memory.core import MemoryCore
from partner_memory.interop import export_partner_state
from partner_memory.store import open_store
from partner_memory.store.contract.base import UnitQuery
from tests.helpers import assert_unit_consistent

ROOT = Path(__file__).parent.parent
KILLS = int(os.environ.get("PARTNER_MEMORY_CRASH_KILLS", "12"))
pytestmark = pytest.mark.slow


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return env


def _kill_updater(database: str, tag: str, rng: random.Random) -> list[tuple[str, str, str, int]]:
    with subprocess.Popen(
        [sys.executable, "-m", "tests.crash_worker", database, "crash", tag],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        env=_child_env(),
    ) as child:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.01, 0.3))
        child.send_signal(signal.SIGKILL)
        child.wait()
        output = child.stdout.read()
    acknowledged = []
    for line in output.splitlines():
        parts = line.split()
        if len(parts) == 4:  # a line cut by the kill is not an acknowledgement
            acknowledged.append((parts[0], parts[1], parts[2], int(parts[3])))
    return acknowledged


@pytest.mark.slow
def test_sigkill_during_updates_loses_no_acknowledged_write(store_url: str) -> None:
    rng = random.Random(20261130)
    acknowledged: list[tuple[str, str, str, int]] = []
    for kill in range(KILLS):
        acknowledged += _kill_updater(store_url, f"k{kill}", rng)
        store = open_store(store_url)  # opens cleanly after every kill
        try:
            core = MemoryCore(store, "crash", create=False)
            for unit_id in core.unit_ids():
                assert_unit_consistent(core, unit_id)
                slices = core.list_slices(unit_id)
                # every message belongs to exactly one slice: no half-written update
                assert sum(len(s) for s in slices) == core.get_unit_info(unit_id).message_count
                for s in slices:
                    stored = core.read_slice_messages(unit_id, s.id)
                    assert [m.content.split()[0] for m in stored] == [
                        f"{s.summary}-{j}" for j in range(len(s))
                    ]
            for unit_id, slice_id, summary, size in acknowledged:
                found = core.get_memory_slice(unit_id, slice_id)
                assert (found.summary, len(found)) == (summary, size)
        finally:
            store.close()
    assert len(acknowledged) > KILLS  # the kills landed mid-stream, not before any write
    print(f"figures: {KILLS} kills, {len(acknowledged)} acknowledged updates, 0 lost")


def _big_state(root: Path, units: int = 30, per_unit: int = 400) -> Path:
    (root / "core" / "memory").mkdir(parents=True)
    ids = [f"unit-{u:03d}" for u in range(units)]
    for u, unit_id in enumerate(ids):
        doc = {
            "id": unit_id,
            "update_timestamp": 1_700_000_000_000 + u,
            "conversation_messages": [
                {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"{unit_id} message {i} 记忆",
                }
                for i in range(per_unit)
            ],
            "memory_slices": [
                {
                    "id": f"{unit_id}-s{k}",
                    "start_index": k * 100,
                    "end_index": (k + 1) * 100,
                    "summary": f"summary {k}",
                    "created_timestamp": 1_700_000_000_000 + u,
                }
                for k in range(per_unit // 100)
            ],
        }
        (root / "core" / "memory" / f"memory-unit{unit_id}.json").write_text(
            json.dumps(doc), "utf-8"
        )
    core = {"memory_session_id": ids[-1], "memory_unit_uuid_set": ids}
    (root / "core" / "memory.json").write_text(json.dumps(core), "utf-8")
    return root


def _import_cmd(database: str, state: Path, namespace: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "partner_memory",
        "import-partner",
        str(state),
        "--db",
        database,
        "--namespace",
        namespace,
    ]


@pytest.mark.slow
def test_sigkill_during_import_is_all_or_nothing(store_url: str, tmp_path: Path) -> None:
    rng = random.Random(7)
    state = _big_state(tmp_path / "state")
    started = time.monotonic()
    subprocess.run(
        _import_cmd(store_url, state, "reference"),
        check=True,
        env=_child_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    duration = time.monotonic() - started
    for kill in range(max(KILLS // 2, 3)):
        namespace = f"import-{kill}"
        child = subprocess.Popen(
            _import_cmd(store_url, state, namespace),
            env=_child_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.3, 1.0) * duration)
        child.send_signal(signal.SIGKILL)
        child.wait()
        store = open_store(store_url)
        try:
            info = store.get_namespace(namespace)
            if info is not None:  # the transaction committed before the kill: all of it
                assert info.unit_count == 30
                assert (
                    sum(u.message_count for u in store.list_units(namespace, UnitQuery(limit=100)))
                    == 12_000
                )
        finally:
            store.close()
        subprocess.run(
            _import_cmd(store_url, state, namespace),
            check=True,
            env=_child_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
        )
        store = open_store(store_url)
        try:
            export_partner_state(MemoryCore(store, namespace), tmp_path / namespace)
        finally:
            store.close()
        for path in sorted(state.rglob("*.json")):  # the export adds an empty cognition.json
            relative = path.relative_to(state)
            exported = json.loads((tmp_path / namespace / relative).read_text("utf-8"))
            assert exported == json.loads(path.read_text("utf-8"))
