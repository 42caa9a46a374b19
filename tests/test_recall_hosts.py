"""Forgets reach every host: two hosts (this process, and a `serve` in another with an
index home of its own) on one database; what one forgets leaves the other's index files
within a few follow intervals, whether or not the other searches again."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from partner_memory import MemoryService
from partner_memory.recall.replicas import UNNAMED_GRACE_S, RecallIndexSettings
from tests.http_server import Server

SECRET = "quokkalantern"
#: The follow interval the other host runs with, and how long the test waits at most
#: (a loaded machine starts a round late; the bound asserted is "within the wait").
FOLLOW_S, WAIT_S = 0.2, 60.0


def _copies(home: Path) -> dict[str, int]:
    """The index copies a host holds: namespace -> the generation each was built for."""
    return {
        json.loads(p.read_text("utf-8"))["namespace"]: json.loads(p.read_text("utf-8"))[
            "generation"
        ]
        for p in home.glob("v*/*.namespace")
        if p.with_suffix("").is_dir()
    }


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "the other host kept its copy"
        time.sleep(0.05)


def _holds(home: Path, text: bytes) -> bool:
    return any(text in p.read_bytes() for p in home.rglob("*") if p.is_file())


@pytest.mark.parametrize("forget", ["messages", "purge", "namespace"])
def test_a_forget_on_one_host_leaves_no_copy_on_another(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forget: str
) -> None:
    here, there = tmp_path / "host-a", tmp_path / "host-b"
    monkeypatch.setenv("PARTNER_MEMORY_RECALL_INDEX", str(there))
    monkeypatch.setenv("PARTNER_MEMORY_RECALL_FOLLOW_S", str(FOLLOW_S))
    other = Server(store_url)
    try:
        with MemoryService.open(store_url, recall_index=RecallIndexSettings(str(here))) as service:
            memory = service.memory("agent")
            said = memory.record_turn(f"My locker code word is {SECRET}", "Noted")
            memory.record_turn("And the weather is fine", "Good")
            memory.roll_now(idle=True)
            with other.client() as http:
                asked = {"query": SECRET, "k": 3}
                found = http.post("/v1/namespaces/agent/recall", json=asked).json()
                assert SECRET in found["hits"][0]["message"]["content"]
                built = _copies(there)
                assert list(built) == ["agent"]  # the other host's copy, named
                if forget in ("messages", "purge"):
                    memory.forget_messages([said.user.id])
                    if forget == "purge":  # out of this host's files and the database's
                        service.purge()
                else:
                    memory.forget_all()
                # the other host does not search again: its follower drops the copy
                _until(lambda: _copies(there).get("agent", -1) != built["agent"])
                assert not _holds(there, SECRET.encode())
                again = http.post("/v1/namespaces/agent/recall", json=asked).json()
                assert all(SECRET not in h["message"]["content"] for h in again["hits"])
    finally:
        other.stop()


def test_a_host_drops_stale_and_unnamed_copies_when_it_starts(
    store_url: str, tmp_path: Path
) -> None:
    """A host that was down during a forget drops its copy before it serves; a copy
    from before copies were named is dropped too (it is rebuilt when searched), but not
    one that another process is building now (named when its first build ends)."""
    home = RecallIndexSettings(str(tmp_path / "home"))
    with MemoryService.open(store_url, recall_index=home) as service:
        memory = service.memory("agent")
        said = memory.record_turn(f"My locker code word is {SECRET}", "Noted")
        memory.roll_now(idle=True)
        assert memory.recall(SECRET).hits
        (copy,) = (tmp_path / "home").glob("v*/*.namespace")
        unnamed = copy.with_name("0" * 32)
        unnamed.mkdir()
        (unnamed / "meta.json").write_text("{}", "utf-8")
        long_ago = time.time() - UNNAMED_GRACE_S - 1
        os.utime(unnamed, (long_ago, long_ago))
        building = copy.with_name("1" * 32)  # another process's first build: kept
        building.mkdir()
    with MemoryService.open(store_url, recall_index=RecallIndexSettings("memory")) as elsewhere:
        elsewhere.memory("agent").forget_messages([said.user.id])
    with MemoryService.open(store_url, recall_index=home):
        assert not copy.exists()
        assert not copy.with_suffix("").exists()
        assert not unnamed.exists()
        assert building.exists()


def test_the_follow_interval_is_checked() -> None:
    from partner_memory.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="PARTNER_MEMORY_RECALL_FOLLOW_S"):
        RecallIndexSettings.from_env({"PARTNER_MEMORY_RECALL_FOLLOW_S": "soon"})
    with pytest.raises(ConfigurationError, match="above 0"):
        RecallIndexSettings.from_env({"PARTNER_MEMORY_RECALL_FOLLOW_S": "0"})
    assert RecallIndexSettings.from_env({}).follow_s == 5.0
