"""Every entry point builds its service from the same `Settings`: under one environment
(an LLM, a rolling number, no embedder, a recall index directory) the library's
`open`s, their asyncio twins, each CLI command that opens a memory (`chat` too), and `serve`'s
app all build services that agree on each of them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from partner_memory import PartnerMemory
from partner_memory.aio import AsyncMemoryService, AsyncPartnerMemory
from partner_memory.cli import app
from partner_memory.http.serve import app_from_env
from partner_memory.runtime import MemoryRuntime
from partner_memory.service import MemoryService

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "conversation.jsonl"


def _built(runtime: MemoryRuntime) -> tuple[Any, ...]:
    """What decides a service's behaviour that the environment sets."""
    client = runtime._client
    return (
        runtime.analysis.embedder_name,
        runtime.settings,
        runtime.recall.replicas.home,
        None if client is None else (client.settings.base_url, client.settings.model),
    )


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Each service constructed while the test runs, as `_built` sees it."""
    seen: list[tuple[Any, ...]] = []
    construct = MemoryRuntime.__init__

    def observed(self: MemoryRuntime, *args: Any, **kwargs: Any) -> None:
        construct(self, *args, **kwargs)
        seen.append(_built(self))

    monkeypatch.setattr(MemoryRuntime, "__init__", observed)
    return seen


def test_every_entry_point_builds_the_same_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_llm: Any, built: list[Any]
) -> None:
    database = str(tmp_path / "memory.db")
    indexes = tmp_path / "indexes"
    for name, value in {
        "PARTNER_MEMORY_DB": database,
        "PARTNER_MEMORY_EMBEDDINGS": "off",
        "PARTNER_MEMORY_RECALL_INDEX": str(indexes),
        "PARTNER_MEMORY_ROLLING_MAX_MESSAGES": "40",
        "PARTNER_MEMORY_LLM_BASE_URL": fake_llm.base_url,
        "PARTNER_MEMORY_LLM_MODEL": "local",
        "PARTNER_MEMORY_LLM_TOPICS": "off",
    }.items():
        monkeypatch.setenv(name, value)
    expected = ("none", None, indexes, (fake_llm.base_url, "local"))
    entry_points: list[str] = []

    def ran(name: str) -> None:
        entry_points.append(name)
        assert len(built) == len(entry_points), f"{name} built no service, or several"

    runner = CliRunner()

    def cli(*args: str, said: str | None = None) -> str:
        done = runner.invoke(app, list(args), input=said)
        assert done.exit_code == 0, done.output
        ran("partner-memory " + args[0])
        return done.output

    cli("ingest", str(EXAMPLE), "-n", "mei")
    cli("reindex", "-n", "mei")
    found = json.loads(cli("recall", "Kyoto", "-n", "mei", "--json"))
    cli("forget", "message", found["hits"][0]["message"]["id"], "-n", "mei")
    assert "I noted" in cli("chat", "-n", "mei", said="Hello again\n")  # the LLM's answer
    with PartnerMemory.open(namespace="mei"):
        ran("PartnerMemory.open")
    with MemoryService.open():
        ran("MemoryService.open")

    async def aio() -> None:
        async with await AsyncPartnerMemory.open(namespace="mei"):
            ran("AsyncPartnerMemory.open")
        async with await AsyncMemoryService.open():
            ran("AsyncMemoryService.open")

    asyncio.run(aio())
    with TestClient(app_from_env()) as served:  # started and stopped: its service closed
        ran("serve (each worker's app)")
        assert served.get("/healthz").status_code == 200

    first = built[0]
    assert first[0] == expected[0]
    assert first[1].max_messages == 40
    assert first[2:] == expected[2:]
    for name, seen in zip(entry_points, built, strict=True):
        assert seen == first, name
