"""Forgotten text leaves the database files too: after `purge` on PostgreSQL (a delete
leaves old row versions in the table files), at once on SQLite (`secure_delete`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from partner_memory import MemoryService, RollingSettings
from partner_memory.cli import app

SECRET = "xylophonequokka"
KEPT = "marmaladeotter"


def _remember(database: str) -> None:
    """The secret in every place text goes, in a namespace beside one that stays (so the
    pages it was on are not emptied and truncated away by themselves)."""
    with MemoryService.open(database, settings=RollingSettings(idle_check_interval_s=0)) as service:
        for namespace, word in (("keep", KEPT), ("agent", SECRET), ("keep-2", KEPT)):
            memory = service.memory(namespace)
            memory.record_turn(f"My locker code word is {word}.", "I will keep it safe.")
            memory.record_turn("And I like tea.", "Noted.")
            memory.roll_now()
            memory.record_turn(f"Did I tell you {word}?", "You did.")  # in the window
            memory.wait()
            assert memory.recall(word).hits


def _postgres_files(url: str) -> Iterator[Path]:
    """Every file of the test schema's tables, their TOAST tables and all their indexes."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")  # what the buffers hold, written to the files
        data = Path(str(conn.execute("SHOW data_directory").fetchone()[0]))  # type: ignore[index]
        relations = conn.execute(
            """WITH own AS (SELECT oid, reltoastrelid FROM pg_class
                            WHERE relnamespace = current_schema()::regnamespace)
            SELECT pg_relation_filepath(oid) FROM own
            UNION SELECT pg_relation_filepath(reltoastrelid) FROM own WHERE reltoastrelid <> 0
            UNION SELECT pg_relation_filepath(i.indexrelid) FROM pg_index i
                  JOIN own ON i.indrelid = own.reltoastrelid"""
        ).fetchall()
    for (relative,) in relations:
        if relative is None:
            continue
        yield from data.glob(f"{relative}*")


def _copies(paths: Iterator[Path], word: str = SECRET) -> int:
    return sum(path.read_bytes().count(word.encode()) for path in paths)


def test_purge_removes_forgotten_text_from_the_postgres_files(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        data = Path(str(conn.execute("SHOW data_directory").fetchone()[0]))  # type: ignore[index]
    if not os.access(data, os.R_OK):
        pytest.skip(f"the server's files ({data}) are not readable by this user")
    _remember(pg_url)
    assert _copies(_postgres_files(pg_url)) > 0  # the scan sees the text where it is
    runner = CliRunner()
    forgot = runner.invoke(
        app, ["forget", "namespace", "--db", pg_url, "-n", "agent", "--yes", "--purge"]
    )
    assert forgot.exit_code == 0, forgot.output
    assert "purged" in forgot.output
    assert _copies(_postgres_files(pg_url)) == 0
    assert _copies(_postgres_files(pg_url), KEPT) > 0  # what was not forgotten stays
    again = runner.invoke(app, ["purge", "--db", pg_url])  # an operator's schedule: idempotent
    assert again.exit_code == 0, again.output


def test_forgotten_text_leaves_the_sqlite_files(tmp_path: Path) -> None:
    database = tmp_path / "m.db"
    _remember(str(database))
    files = lambda: [  # noqa: E731  the database's files and this host's recall indexes
        p
        for p in tmp_path.rglob("*")
        if p.is_file() and (p.name.startswith("m.db") or "m.db-recall" in p.parts)
    ]
    assert _copies(iter(files())) > 0
    assert _copies(p for p in files() if "m.db-recall" in p.parts) > 0  # the index too
    runner = CliRunner()
    forgot = runner.invoke(
        app, ["forget", "namespace", "--db", str(database), "-n", "agent", "--yes"]
    )
    assert forgot.exit_code == 0, forgot.output
    purged = runner.invoke(app, ["purge", "--db", str(database)])
    assert purged.exit_code == 0, purged.output
    assert _copies(iter(files())) == 0
    assert _copies(iter(files()), KEPT) > 0


def test_purge_refuses_a_read_only_store(tmp_path: Path) -> None:
    from partner_memory import open_store
    from partner_memory.errors import ConfigurationError

    database = tmp_path / "m.db"
    _remember(str(database))
    store = open_store(str(database), read_only=True)
    try:
        with pytest.raises(ConfigurationError, match="read-only"):
            store.purge()
    finally:
        store.close()


def _holding(pg_url: str, table: str = "messages") -> psycopg.Connection[tuple[object, ...]]:
    """A client in a REPEATABLE READ transaction that has read `table`: its snapshot,
    older than any forget after it, still sees what the forget deletes."""
    holder = psycopg.connect(pg_url)
    holder.execute("SET application_name = 'a report'")
    holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    holder.execute(f"SELECT count(*) FROM {table}").fetchone()
    return holder


def test_purge_waits_for_an_older_snapshot_then_leaves_no_copy(pg_url: str) -> None:
    """The copy a purge left behind under load: a transaction older than the forget
    kept the deleted versions alive through VACUUM FULL. The purge now waits for it."""
    import threading

    with psycopg.connect(pg_url) as conn:
        data = Path(str(conn.execute("SHOW data_directory").fetchone()[0]))  # type: ignore[index]
    if not os.access(data, os.R_OK):
        pytest.skip(f"the server's files ({data}) are not readable by this user")
    _remember(pg_url)
    holder = _holding(pg_url, "pg_class")  # a snapshot, no lock VACUUM FULL would wait for
    ends = threading.Timer(1.5, holder.commit)
    ends.start()
    try:
        forgot = CliRunner().invoke(
            app, ["forget", "namespace", "--db", pg_url, "-n", "agent", "--yes", "--purge"]
        )
        assert forgot.exit_code == 0, forgot.output
    finally:
        ends.join()
        holder.close()
    assert _copies(_postgres_files(pg_url)) == 0
    assert _copies(_postgres_files(pg_url), KEPT) > 0


def test_purge_refuses_naming_a_snapshot_that_outlives_its_wait(pg_url: str) -> None:
    from partner_memory import open_store
    from partner_memory.errors import StorageUnavailableError
    from partner_memory.store.postgres.purge import purge_tables
    from partner_memory.store.sql.schema import TEXT_TABLES

    with psycopg.connect(pg_url) as conn:
        data = Path(str(conn.execute("SHOW data_directory").fetchone()[0]))  # type: ignore[index]
    readable = os.access(data, os.R_OK)
    # a snapshot alone (it read none of the tables), then one that holds a table's lock
    for table, said in (("pg_class", "still visible"), ("messages", "messages is in use")):
        _remember(pg_url)
        holder = _holding(pg_url, table)
        try:
            with MemoryService.open(pg_url) as service:
                service.memory("agent").forget_all()
            with (
                psycopg.connect(pg_url, autocommit=True) as conn,
                pytest.raises(StorageUnavailableError, match=rf"{said}.*a report.*again"),
            ):
                purge_tables(conn, TEXT_TABLES, wait_s=0.3)
            if readable:
                assert _copies(_postgres_files(pg_url)) > 0  # what the refusal was about
        finally:
            holder.rollback()
            holder.close()
    store = open_store(pg_url)
    try:
        store.purge()  # the report ended: now it goes
    finally:
        store.close()
    if readable:
        assert _copies(_postgres_files(pg_url)) == 0
