"""Read-only access: opening never takes the write lock, and read commands answer during writes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from partner_memory import ConfigurationError, MemoryCore, Message, PartnerMemory, open_store
from partner_memory.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "partner-state"

HOLD_SQLITE = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE namespaces SET memory_session_id = memory_session_id")
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
"""

HOLD_POSTGRES = """
import sys, time, psycopg
conn = psycopg.connect(sys.argv[1])
conn.execute("SELECT pg_advisory_xact_lock(1347571277)")
conn.execute("SELECT * FROM namespaces FOR UPDATE").fetchall()
conn.execute("LOCK TABLE activity IN EXCLUSIVE MODE")
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
conn.rollback()
"""


def _filled(store_url: str) -> None:
    with PartnerMemory(open_store(store_url), "agent", idle_timer=False, owns_store=True) as m:
        m.record_turn("I'm off to Kyoto in April.", "Book early.")
        m.roll_now()


def _cli(store_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PARTNER_MEMORY_BUSY_TIMEOUT="1")
    return subprocess.run(
        [sys.executable, "-m", "partner_memory", *args, "--db", store_url],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_read_commands_answer_while_another_process_writes(store_url: str) -> None:
    """units, show, stats, context, session and namespaces succeed during a long write."""
    _filled(store_url)
    core_store = open_store(store_url, read_only=True)
    (unit_id,) = MemoryCore(core_store, "agent", create=False).unit_ids()
    core_store.close()
    hold = HOLD_POSTGRES if store_url.startswith("postgresql") else HOLD_SQLITE
    holder = subprocess.Popen(
        # held until killed below: however slowly the commands run on a loaded machine
        [sys.executable, "-c", hold, store_url, "3600"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "holding"
        for command in (
            ["units", "-n", "agent"],
            ["show", unit_id, "-n", "agent", "--messages"],
            ["stats", "-n", "agent"],
            ["context", "-n", "agent"],
            ["session", "-n", "agent"],
            ["namespaces"],
        ):
            done = _cli(store_url, *command)
            assert done.returncode == 0, (command, done.stderr)
        assert holder.poll() is None  # the write was held the whole time
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def test_read_only_store_refuses_every_write(store_url: str) -> None:
    _filled(store_url)
    store = open_store(store_url, read_only=True)
    try:
        core = MemoryCore(store, "agent", create=False)
        before = [core.get_unit_info(u) for u in core.unit_ids()]
        with pytest.raises(ConfigurationError, match="read-only"):
            core.update_memory_unit([Message(role="user", content="x")], "s")
        with pytest.raises(ConfigurationError, match="read-only"):
            MemoryCore(store, "somebody-new")
        with pytest.raises(ConfigurationError, match="read-only"):
            store.append_trajectory("agent", [Message(role="user", content="x")])
        with PartnerMemory(store, "agent", idle_timer=False, create=False) as memory:
            assert memory.context()  # reading context writes nothing
            with pytest.raises(ConfigurationError, match="read-only"):
                memory.record_turn("a", "b")
        assert [core.get_unit_info(u) for u in core.unit_ids()] == before
    finally:
        store.close()


def test_read_only_never_creates_a_file(tmp_path: Path) -> None:
    missing = tmp_path / "nothing.db"
    with pytest.raises(ConfigurationError, match="does not exist"):
        open_store(missing, read_only=True)
    assert not missing.exists()


def test_sqlite_without_a_writable_directory_is_readable(tmp_path: Path) -> None:
    """A WAL file whose -shm cannot be created (as in a read-only directory) is still read."""
    path = tmp_path / "memory.db"
    _filled(str(path))
    (tmp_path / "memory.db-shm").mkdir()  # nothing can create the shared-memory file now
    store = SQLiteStore(path, read_only=True)
    try:
        assert [n.name for n in store.list_namespaces()] == ["agent"]
        assert MemoryCore(store, "agent", create=False).list_units().total == 1
    finally:
        store.close()


def test_opening_an_up_to_date_database_takes_no_write_lock(sqlite_path: Path) -> None:
    """Open is a read: it succeeds while another connection holds the write lock."""
    SQLiteStore(sqlite_path).close()
    import sqlite3

    writer = sqlite3.connect(sqlite_path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        store = SQLiteStore(sqlite_path, busy_timeout=0.2)
        assert store.list_namespaces() == []
        store.close()
        assert time.monotonic() - started < 5
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_read_only_store_refuses_an_outdated_schema(sqlite_path: Path) -> None:
    import sqlite3

    SQLiteStore(sqlite_path).close()
    conn = sqlite3.connect(sqlite_path)
    conn.execute(
        "DELETE FROM partner_memory_schema"
        " WHERE version = (SELECT MAX(version) FROM partner_memory_schema)"
    )
    conn.commit()
    conn.close()
    with pytest.raises(ConfigurationError, match="open it once for writing"):
        SQLiteStore(sqlite_path, read_only=True)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize("damage", ["truncated", "garbage page", "newer schema", "older schema"])
def test_a_read_command_leaves_a_file_it_refuses_as_it_was(tmp_path: Path, damage: str) -> None:
    """A read command that refuses a database writes nothing: not the file, and no
    -wal or -shm beside it."""
    import sqlite3

    made = tmp_path / "made"
    made.mkdir()
    _filled(str(made / "memory.db"))
    folder = tmp_path / "bad"
    folder.mkdir()
    path = folder / "memory.db"
    path.write_bytes((made / "memory.db").read_bytes())  # as copied, without its WAL
    if damage in ("newer schema", "older schema"):
        conn = sqlite3.connect(path)
        change = (
            "INSERT INTO partner_memory_schema VALUES (99)"
            if damage == "newer schema"
            else "DELETE FROM partner_memory_schema"
            " WHERE version = (SELECT MAX(version) FROM partner_memory_schema)"
        )
        conn.execute(change)
        conn.commit()
        conn.close()
    elif damage == "truncated":
        with path.open("r+b") as file:
            file.truncate(path.stat().st_size // 2)
    else:
        page = 4096
        with path.open("r+b") as file:
            file.seek(page * 3)
            file.write(b"\xff" * page)
    before = _snapshot(folder)
    for command in (["units", "--namespace", "agent"], ["namespaces"], ["stats"]):
        answer = _cli(str(path), *command)
        assert answer.returncode != 0, (command, answer.stdout)
        assert any(w in answer.stderr for w in ("not a usable", "schema version")), answer.stderr
        assert _snapshot(folder) == before, command
