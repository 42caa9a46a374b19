"""Small contracts between the layers, each pinned by what once went wrong."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from partner_memory import MemoryCore, Message, PartnerMemory, open_store
from partner_memory.recall import embed
from partner_memory.rolling import ChatClient, LLMCompressor, LLMSettings, UsageMeter
from partner_memory.store.sql.dialect import SQLITE
from partner_memory.store.sql.schema import PerBackend, migration_steps


def test_a_read_only_store_opens_an_existing_namespace(tmp_path: Path) -> None:
    database = str(tmp_path / "m.db")
    with PartnerMemory(open_store(database), "agent", idle_timer=False, owns_store=True) as m:
        m.record_turn("hi", "hello")
    store = open_store(database, read_only=True)
    try:
        core = MemoryCore(store, "agent")  # create=True, as a handle makes it: no write needed
        assert core.memory_session_id
    finally:
        store.close()


def test_a_migration_statement_names_every_backend() -> None:
    with pytest.raises(TypeError):
        PerBackend(sqlite="SELECT 1")  # type: ignore[call-arg]
    assert migration_steps(SQLITE)  # every released step spells SQLite


def test_the_static_model_is_made_once_however_many_threads_ask(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[object] = []

    class Slow(embed.StaticEmbedder):
        def __init__(self) -> None:
            time.sleep(0.05)  # long enough for every thread to pass a check without a lock
            super().__init__()
            made.append(self)

    monkeypatch.setattr(embed, "StaticEmbedder", Slow)
    monkeypatch.setattr(embed, "_STATIC", [])
    start = threading.Barrier(8)
    got: list[object] = []

    def ask() -> None:
        start.wait()
        got.append(embed._static())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 1
    assert len({id(g) for g in got}) == 1


def test_the_llm_compressor_keeps_one_pool_and_closes_it(fake_llm: Any) -> None:
    compressor = LLMCompressor(
        ChatClient(LLMSettings(base_url=fake_llm.base_url, model="m", max_retries=0))
    )
    long = Message("user", "x. " * 600)

    def workers() -> set[int]:
        return {t.ident or 0 for t in threading.enumerate() if t.name.startswith("pm-compress")}

    before = workers()
    compressor.compress([long, long], UsageMeter())
    first = workers() - before
    compressor.compress([long, long], UsageMeter())
    assert workers() - before == first  # the same threads, not a new pool per rolling
    compressor.close()
    assert not workers() - before
