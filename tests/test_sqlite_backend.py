"""Failure modes that belong to the SQLite backend alone."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from partner_memory.errors import ConfigurationError, StorageUnavailableError
from partner_memory.store import open_store
from partner_memory.store.contract.base import NewSlice
from partner_memory.store.sql.verbs import MIGRATIONS, SCHEMA_TABLE
from partner_memory.store.sqlite import SQLiteStore
from tests.helpers import messages


def test_wal_mode_and_foreign_keys(sqlite_store: SQLiteStore, sqlite_path: Path) -> None:
    sqlite_store.ensure_namespace("ns", "u")
    conn = sqlite3.connect(sqlite_path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_readers_proceed_while_a_writer_holds_the_lock(
    sqlite_store: SQLiteStore, sqlite_path: Path
) -> None:
    sqlite_store.ensure_namespace("ns", "u")
    sqlite_store.append("ns", messages(2), NewSlice("a", "a", 1))
    writer = sqlite3.connect(sqlite_path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE units SET message_count = 99")
    try:
        info = sqlite_store.get_unit("ns", "u")
        assert info is not None
        assert info.message_count == 2  # the committed state, read without waiting
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_locked_database_is_reported_and_unchanged(sqlite_path: Path) -> None:
    store = SQLiteStore(sqlite_path, busy_timeout=0.2)
    store.ensure_namespace("ns", "u")
    blocker = sqlite3.connect(sqlite_path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StorageUnavailableError, match="locked"):
            store.append("ns", messages(1), NewSlice("x", "x", 1))
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert store.get_unit("ns", "u") is None
    store.close()


def test_a_new_file_being_written_elsewhere_is_waited_for(tmp_path: Path) -> None:
    """Switching a new file to WAL while another connection holds its write lock
    gets BUSY from SQLite at once, without the busy handler (processes opening a
    new store together meet this): the store waits, up to its busy timeout."""
    path = tmp_path / "new.db"
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    with pytest.raises(StorageUnavailableError, match="locked"):
        SQLiteStore(path, busy_timeout=0.2)
    released = threading.Event()

    def release() -> None:
        blocker.execute("COMMIT")
        blocker.close()
        released.set()

    timer = threading.Timer(0.3, release)
    timer.start()
    try:
        store = SQLiteStore(path, busy_timeout=60)
    finally:
        timer.join()
    assert released.is_set()
    store.ensure_namespace("ns", "u")
    store.append("ns", messages(1), NewSlice("x", "x", 1))
    unit = store.get_unit("ns", "u")
    assert unit is not None
    assert unit.message_count == 1
    store.close()


def test_not_a_database_file(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_text("hello")
    with pytest.raises(StorageUnavailableError, match=r"junk\.db"):
        SQLiteStore(junk)
    assert junk.read_text() == "hello"


def test_directory_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="directory"):
        SQLiteStore(tmp_path)
    with pytest.raises(ConfigurationError, match="does not exist"):
        open_store(tmp_path / "absent.db", create=False)
    with pytest.raises(StorageUnavailableError, match="absent-dir"):
        SQLiteStore(tmp_path / "absent-dir" / "x.db")


def test_newer_schema_is_refused(sqlite_path: Path) -> None:
    SQLiteStore(sqlite_path).close()
    conn = sqlite3.connect(sqlite_path)
    conn.execute(f"INSERT INTO {SCHEMA_TABLE} (version) VALUES (?)", (len(MIGRATIONS) + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(ConfigurationError, match="newer"):
        SQLiteStore(sqlite_path)


def test_sqlite_url_prefix(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'x.db'}")
    assert isinstance(store, SQLiteStore)
    assert store.path == tmp_path / "x.db"
    store.close()


def test_bad_synchronous_setting(sqlite_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="synchronous"):
        SQLiteStore(sqlite_path, synchronous="SOMETIMES")  # type: ignore[arg-type]


def test_version_1_database_migrates_without_losing_data(sqlite_path: Path) -> None:
    conn = sqlite3.connect(sqlite_path)
    conn.execute(f"CREATE TABLE {SCHEMA_TABLE} (version INTEGER NOT NULL)")
    for statement in MIGRATIONS[0]:
        conn.execute(statement.format(serial="INTEGER PRIMARY KEY"))
    conn.execute(f"INSERT INTO {SCHEMA_TABLE} (version) VALUES (1)")
    conn.execute("INSERT INTO namespaces (id, name, memory_session_id) VALUES (1, 'ns', 'u')")
    conn.execute("INSERT INTO units VALUES (1, 1, 'u', 5, 1, 1)")
    conn.execute("INSERT INTO messages VALUES (1, 0, 'm0', 'user', 'old words', NULL, NULL)")
    conn.execute("INSERT INTO slices VALUES (1, 1, 's', 0, 1, 'old summary', 5)")
    conn.commit()
    conn.close()
    store = SQLiteStore(sqlite_path)
    try:
        assert store.schema_version() == len(MIGRATIONS)
        assert store.read_messages("ns", "u", 0, 1)[0].content == "old words"
        found = store.get_slice("ns", "u", "s")
        assert found is not None
        assert (found.summary, found.summarizer) == ("old summary", None)
        assert store.load_trajectory("ns").messages == []
        info = store.get_namespace("ns")  # step 4 counted what was there
        assert info is not None
        assert (info.unit_count, info.slice_count) == (1, 1)
        assert store.recent_slices("ns", 5) == [("u", found)]
    finally:
        store.close()


def test_version_2_rollings_become_the_ordered_log(sqlite_path: Path) -> None:
    """Step 3 numbers existing rollings per namespace, so consumers can follow them."""
    from partner_memory.store.sql.dialect import SQLITE
    from partner_memory.store.sql.schema import migration_steps

    conn = sqlite3.connect(sqlite_path)
    conn.execute(f"CREATE TABLE {SCHEMA_TABLE} (version INTEGER NOT NULL)")
    for step in migration_steps(SQLITE)[:2]:
        for statement in step:
            conn.execute(statement)
    conn.execute(f"INSERT INTO {SCHEMA_TABLE} (version) VALUES (1), (2)")
    conn.execute("INSERT INTO namespaces (id, name, memory_session_id) VALUES (1, 'a', 'u1')")
    conn.execute("INSERT INTO namespaces (id, name, memory_session_id) VALUES (2, 'b', 'u2')")
    conn.execute("INSERT INTO units VALUES (1, 1, 'u1', 5, 2, 2)")
    conn.execute("INSERT INTO units VALUES (2, 2, 'u2', 5, 1, 1)")
    for position in range(2):
        conn.execute(
            "INSERT INTO messages VALUES (1, ?, ?, 'user', 'words', NULL, NULL)",
            (position, f"m{position}"),
        )
    conn.execute("INSERT INTO messages VALUES (2, 0, 'n0', 'user', 'other', NULL, NULL)")
    for pk, unit, slice_id, start in ((1, 1, "s1", 0), (2, 2, "t1", 0), (3, 1, "s2", 1)):
        conn.execute(
            "INSERT INTO slices VALUES (?, ?, ?, ?, ?, 'sum', 5, 'extractive')",
            (pk, unit, slice_id, start, start + 1),
        )
        namespace = 1 if unit == 1 else 2
        conn.execute(
            "INSERT INTO rollings (namespace_id, unit_id, slice_id, started_at, idle, messages,"
            " summarizer, llm_calls, prompt_tokens, completion_tokens, llm_ms, pipeline_ms,"
            " fallbacks) VALUES (?, ?, ?, 5, 0, 1, 'extractive', 0, 0, 0, 0, 1, '')",
            (namespace, f"u{unit}", slice_id),
        )
    for pk, message_id in ((1, "w0"), (2, "w1")):
        conn.execute(
            "INSERT INTO trajectory VALUES (?, 1, ?, 'user', 'in the window', NULL, NULL)",
            (pk, message_id),
        )
    conn.execute("INSERT INTO activity VALUES (1, 777)")
    conn.commit()
    conn.close()
    store = SQLiteStore(sqlite_path)
    try:
        window = store.load_trajectory("a")
        assert [m.id for m in window.messages] == ["w0", "w1"]
        assert (window.last_interaction, window.idle_rolled_for) == (777, None)
        assert store.idle_candidates(778, ["a", "b"]) == ["a"]
        assert [e.slice.id for e in store.read_log("a", 0)] == ["s1", "s2"]
        assert [e.seq for e in store.read_log("a", 0)] == [1, 2]
        assert [(e.seq, e.slice.id) for e in store.read_log("b", 0)] == [(1, "t1")]
        assert (store.log_head("a"), store.log_head("b")) == (2, 1)
        assert store.read_log("a", 1)[0].messages[0].id == "m1"
    finally:
        store.close()


def test_another_applications_database_is_never_given_our_schema(tmp_path: Path) -> None:
    """Opening (or ingesting into) a file with tables but none of ours is refused, and the
    file is left exactly as it was."""
    import sqlite3

    from typer.testing import CliRunner

    from partner_memory.cli import app

    foreign = tmp_path / "invoices.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER, total REAL)")
        conn.execute("INSERT INTO invoices VALUES (1, 9.5)")
    before = foreign.read_bytes()
    for read_only in (False, True):
        with pytest.raises(ConfigurationError, match="another application's SQLite database"):
            open_store(str(foreign), read_only=read_only)
    transcript = tmp_path / "t.jsonl"
    transcript.write_text('{"role": "user", "content": "hi"}\n')
    ingested = CliRunner().invoke(app, ["ingest", "--db", str(foreign), str(transcript)])
    assert ingested.exit_code != 0
    assert "invoices" in ingested.output
    assert foreign.read_bytes() == before


def test_a_fifo_as_the_database_is_refused_at_once(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ConfigurationError, match="not a regular file"):
        open_store(str(fifo))  # would block for ever on open
