"""`copy`: SQLite -> PostgreSQL -> SQLite with everything equal, and what it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from partner_memory import (
    ConflictError,
    LogEntry,
    MemoryService,
    NotFoundError,
    Record,
    RollingSettings,
    open_store,
)
from partner_memory.cli import app
from partner_memory.ingest import ReplayClock, ingest, read_transcript
from partner_memory.interop import copy_memory
from partner_memory.memory import PartnerMemory
from partner_memory.store import MemoryStore, Staged

ROOT = Path(__file__).parent.parent
SAMPLE = ROOT / "examples" / "conversation.jsonl"


class Noop:
    name = "noop"

    def apply(self, entry: LogEntry) -> list[Staged]:
        return [
            Record(entry.slice.id, {"seq": entry.seq}, unit=entry.unit.id, slice=entry.slice.id)
        ]


def _rich_memory(store: MemoryStore) -> None:
    """Units with metadata and summarisers, a window, a quiet rolled, a log, a consumer."""
    clock = ReplayClock()
    with PartnerMemory(store, "replayed", clock=clock, idle_timer=False) as memory:
        ingest(memory, read_transcript(SAMPLE), clock, flush=False)
    with MemoryService(store, settings=RollingSettings(idle_check_interval_s=0)) as service:
        service.register_consumer(Noop()).result(10)
        live = service.memory("live")
        live.record_turn("I'm off to Kyoto in April.", "Book early.", metadata={"mood": "happy"})
        live.roll_now(idle=True)
        live.record_turn("<input>a task</input>", "done")


def _everything(store: MemoryStore) -> dict[str, object]:
    """Every row, and the counts each namespace keeps."""
    return {n.name: (n, store.export_namespace(n.name)) for n in store.list_namespaces()}


def test_sqlite_to_postgres_to_sqlite_keeps_everything(tmp_path: Path, pg_url: str) -> None:
    first = open_store(tmp_path / "first.db")
    _rich_memory(first)
    original = _everything(first)
    second = open_store(pg_url)
    third = open_store(tmp_path / "third.db")
    try:
        report = copy_memory(first, second)
        assert sorted(n.name for n in report.namespaces) == ["live", "replayed"]
        copy_memory(second, third)
        assert _everything(second) == original
        assert _everything(third) == original
        clock = ReplayClock()
        with PartnerMemory(third, "replayed", clock=clock, idle_timer=False) as memory:
            again = ingest(memory, read_transcript(SAMPLE), clock, flush=False)
        assert (again.recorded, again.skipped) == (0, again.messages)  # nothing stored twice
    finally:
        for store in (first, second, third):
            store.close()


def test_copy_refuses_to_merge_and_names_what_is_missing(tmp_path: Path) -> None:
    source = open_store(tmp_path / "a.db")
    target = open_store(tmp_path / "b.db")
    try:
        _rich_memory(source)
        copy_memory(source, target, namespaces=["live"])
        with pytest.raises(ConflictError, match="'live' already exists"):
            copy_memory(source, target)
        assert [n.name for n in target.list_namespaces()] == ["live"]
        with pytest.raises(NotFoundError, match="ghost"):
            copy_memory(source, target, namespaces=["ghost"])
    finally:
        source.close()
        target.close()


def test_cli_copy_is_a_backup(tmp_path: Path) -> None:
    runner = CliRunner()
    db, backup = str(tmp_path / "m.db"), str(tmp_path / "backup.db")
    assert runner.invoke(app, ["ingest", str(SAMPLE), "--db", db]).exit_code == 0
    done = runner.invoke(app, ["copy", db, backup, "--json"])
    assert done.exit_code == 0, done.output
    copied_ns = json.loads(done.output)["namespaces"]
    assert [(n["namespace"], n["unit_count"]) for n in copied_ns] == [("default", 2)]
    original = json.loads(runner.invoke(app, ["units", "--db", db, "--json"]).output)
    copied = json.loads(runner.invoke(app, ["units", "--db", backup, "--json"]).output)
    assert copied == original
    again = runner.invoke(app, ["copy", db, backup])
    assert again.exit_code == 5
    assert "already exists" in again.output
