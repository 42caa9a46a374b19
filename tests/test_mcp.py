"""The MCP server, through the official SDK's own client over stdio: it lists the tools,
remembers turns, recalls them, reads and forgets."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent


def _structured(result: Any) -> Any:
    assert not result.is_error, result
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


def test_an_mcp_client_remembers_and_recalls_over_stdio(tmp_path: Path) -> None:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "partner_memory", "mcp", "--db", str(tmp_path / "m.db"), "-n", "agent"],
        cwd=str(ROOT),
    )

    async def session() -> None:
        async with Client(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {
                "remember_turn",
                "recall",
                "get_context",
                "list_units",
                "read_slice",
                "forget_messages",
            }
            assert all(len(t.description or "") > 60 for t in tools.values())
            for said, answer in [
                ("I adopted a cat named Luna", "Lovely! What colour is she?"),
                ("Black with white paws", "Sounds adorable"),
            ]:
                await client.call_tool(
                    "remember_turn", {"user_input": said, "assistant_output": answer}
                )
            found = _structured(await client.call_tool("recall", {"query": "cat name"}))
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

    asyncio.run(session())
