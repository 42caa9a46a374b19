"""The MCP server, through the official SDK's own client over stdio: it lists the tools,
remembers turns, recalls them, reads and forgets."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from partner_memory.context.render import NOTHING_STORED, NOTHING_SUMMARISED
from partner_memory.store import open_store
from tests.http_server import MCP_ACCEPT, MCP_INITIALIZE, Server, make_key

ROOT = Path(__file__).resolve().parent.parent


def _structured(result: Any) -> Any:
    assert not result.is_error, result
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


async def _remember_recall_forget(client: Client, *, fresh: bool = True) -> None:
    """What an agent does with its memory: list the tools, remember, recall, forget, read
    (`fresh`: in a namespace nothing was stored in)."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {
        "remember_turn",
        "recall",
        "get_context",
        "get_window",
        "list_units",
        "read_slice",
        "forget_messages",
    }
    assert all(len(t.description or "") > 60 for t in tools.values())
    if fresh:
        empty = await client.call_tool("get_context", {})
        assert empty.content[0].text == NOTHING_STORED
    for said, answer in [
        ("I adopted a cat named Luna", "Lovely! What colour is she?"),
        ("Black with white paws", "Sounds adorable"),
    ]:
        turn = {"user_input": said, "assistant_output": answer}
        assert len(_structured(await client.call_tool("remember_turn", turn))["message_ids"]) == 2
    context = (await client.call_tool("get_context", {})).content[0].text
    assert context.startswith(NOTHING_SUMMARISED)  # nothing rolled: the turns themselves
    assert '<message role="user"' in context
    assert context.rindex("named Luna") < context.rindex("Black with white paws")
    found = _structured(await client.call_tool("recall", {"query": "cat name"}))
    answers = _structured(await client.call_tool("recall", {"query": "cat", "role": "assistant"}))
    assert answers["hits"]
    assert {h["message"]["role"] for h in answers["hits"]} == {"assistant"}
    luna = found["hits"][0]["message"]
    assert "Luna" in luna["content"]
    forgot = await client.call_tool("forget_messages", {"message_ids": [luna["id"]]})
    assert _structured(forgot)["message_count"] == 1
    again = _structured(await client.call_tool("recall", {"query": "Luna"}))
    assert all("Luna" not in h["message"]["content"] for h in again["hits"])
    units = _structured(await client.call_tool("list_units", {}))
    assert units["units"] == []  # nothing rolled yet: all in the window
    missing = await client.call_tool("read_slice", {"unit_id": "x", "slice_id": "y"})
    assert missing.is_error
    assert "not found" in missing.content[0].text


def test_an_mcp_client_remembers_and_recalls_over_stdio(tmp_path: Path) -> None:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "partner_memory", "mcp", "--db", str(tmp_path / "m.db"), "-n", "agent"],
        cwd=str(ROOT),
    )

    async def session() -> None:
        async with Client(server) as client:
            await _remember_recall_forget(client)

    asyncio.run(session())


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Server, str]]:
    database = str(tmp_path / "served.db")
    running = Server(database)
    yield running, database
    running.stop()


@asynccontextmanager
async def _over_http(
    server: Server, token: str, namespace: str = "agent-1"
) -> AsyncIterator[Client]:
    """The SDK's client on /mcp, naming the namespace in the URL and sending the key."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        url = f"{server.url}/mcp?namespace={namespace}"
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


def test_an_mcp_client_remembers_and_recalls_over_http(served: tuple[Server, str]) -> None:
    server, database = served
    _, admin = make_key(database, "agent-*", "admin")

    async def session() -> None:
        async with _over_http(server, admin) as client:
            await _remember_recall_forget(client)

    asyncio.run(session())
    store = open_store(database)
    try:
        assert store.get_namespace("agent-1") is not None
    finally:
        store.close()


def test_mcp_over_http_keeps_to_the_keys_namespaces_and_scopes(
    served: tuple[Server, str],
) -> None:
    server, database = served
    _, writer = make_key(database, "agent-*", "write")
    _, reader = make_key(database, "agent-*", "read")
    _, elsewhere = make_key(database, "other-*", "admin")
    turn = {"user_input": "My sister is called Ada", "assistant_output": "Noted"}

    async def session() -> None:
        async with _over_http(server, writer) as client:
            said = _structured(await client.call_tool("remember_turn", turn))
            found = _structured(await client.call_tool("recall", {"query": "sister"}))
            assert "Ada" in found["hits"][0]["message"]["content"]
            refused = await client.call_tool(
                "forget_messages", {"message_ids": said["message_ids"]}
            )
            assert refused.is_error
            assert "may not admin" in refused.content[0].text
        async with _over_http(server, reader) as client:
            refused = await client.call_tool("remember_turn", turn)
            assert refused.is_error
            assert "may not write" in refused.content[0].text
            found = _structured(await client.call_tool("recall", {"query": "sister"}))
            assert "Ada" in found["hits"][0]["message"]["content"]
        async with _over_http(server, reader, "agent-9") as client:
            missing = await client.call_tool("recall", {"query": "sister"})
            assert missing.is_error
            assert "not found" in missing.content[0].text

    asyncio.run(session())

    with httpx.Client(base_url=server.url, headers=MCP_ACCEPT, timeout=30) as http:
        for token, url, status in [
            (None, "/mcp?namespace=agent-1", 401),
            ("pm_0_nonsense", "/mcp?namespace=agent-1", 401),
            (elsewhere, "/mcp?namespace=agent-1", 403),
            (reader, "/mcp", 422),
            (reader, "/mcp?namespace=%20%20", 422),
            (reader, "/mcp?namespace=agent-1%0A", 422),
            (elsewhere, "/mcp?namespace=other-1%252F", 200),  # decoded once: "other-1%2F"
        ]:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            answer = http.post(url, json=MCP_INITIALIZE, headers=headers)
            assert answer.status_code == status, (token, url, answer.text)
            if status != 200:
                assert answer.json()["error"]["message"]
        answered = http.post(
            "/mcp",
            json=MCP_INITIALIZE,
            headers={"Authorization": f"Bearer {reader}", "X-Partner-Memory-Namespace": "agent-1"},
        )
        assert answered.status_code == 200, answered.text
    output = server.stop()
    for secret in (writer, reader, elsewhere, "Ada"):
        assert secret not in output


@pytest.mark.postgres
def test_mcp_over_http_with_four_workers_on_postgresql(pg_url: str) -> None:
    """No MCP session lives in one worker: a client's requests reach any of the four."""
    server = Server(pg_url, "--workers", "4")
    _, admin = make_key(pg_url, "*", "admin")

    async def session() -> None:
        for i in range(3):  # a new client each time: each initialize may land on another worker
            async with _over_http(server, admin, "agent-4w") as client:
                await _remember_recall_forget(client, fresh=i == 0)

    try:
        asyncio.run(session())
    finally:
        server.stop()
