"""Importers: each source made by its own library (or, for Letta, written from its
published schema and checked against it), imported through the CLI, recalled; a
second import adds nothing; a corrupt source is refused with the store unchanged."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from partner_memory import PartnerMemory
from partner_memory.cli import app
from partner_memory.cli.errors import EXIT_CODES
from partner_memory.cli.memory_commands import SourceKind
from partner_memory.errors import InvalidInputError
from partner_memory.held_blocks import HELD_BLOCKS_KEY
from partner_memory.importers import KINDS, import_memory
from partner_memory.model import Message
from partner_memory.settings import StoreSettings
from partner_memory.store.contract.capabilities import ITEMS, require

DATA = Path(__file__).parent / "data"
SAMPLE = Path(__file__).parent.parent / "examples" / "conversation.jsonl"
runner = CliRunner()
#: The exit code of bad input.
BAD = EXIT_CODES[InvalidInputError]


def run(*args: str, code: int = 0) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (result.exit_code, result.output)
    return result.output


def imported(source: str, kind: str, db: str, *more: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(
        run("import", source, "--from", kind, "--db", db, *more, "--json")
    )
    return document


def namespaces(db: str) -> dict[str, int]:
    """Each namespace and the messages it holds (in units and in the window)."""
    listed = json.loads(run("namespaces", "--db", db, "--json"))["namespaces"]
    held = {}
    for name in (n["namespace"] for n in listed):
        units = json.loads(run("units", "--db", db, "-n", name, "--json", "--limit", "100"))
        window = json.loads(run("window", "--db", db, "-n", name, "--json"))
        held[name] = sum(u["message_count"] for u in units["units"]) + len(window["messages"])
    return held


@contextmanager
def opened(db: str, namespace: str) -> Iterator[PartnerMemory]:
    store = StoreSettings().open(db)
    try:
        with PartnerMemory(store, namespace, create=False) as memory:
            yield memory
    finally:
        store.close()


def stored(memory: PartnerMemory) -> list[Message]:
    """The namespace's messages, oldest first: its units', then the window's."""
    units = reversed(memory.core.list_units(limit=100).units)
    held = [m for unit in units for m in memory.core.read_messages(unit.id)]
    return held + [w.message for w in memory.window()]


def seeded(db: str) -> dict[str, int]:
    """A store already holding a namespace, and what it holds (to check it is unchanged)."""
    run("ingest", str(SAMPLE), "--db", db, "-n", "kept")
    return namespaces(db)


def recalled(db: str, namespace: str, query: str) -> list[str]:
    found = json.loads(run("recall", query, "--db", db, "-n", namespace, "--json", "-k", "3"))
    return [hit["message"]["content"] for hit in found["hits"]]


def test_every_kind_is_a_choice_of_the_command() -> None:
    assert tuple(k.value for k in SourceKind) == KINDS


# -- OpenAI Agents SQLiteSession ----------------------------------------------------------


def _agents_database(path: Path) -> None:
    from agents import SQLiteSession

    async def write() -> None:
        trip = SQLiteSession("trip-planning", str(path))
        await trip.add_items(
            [
                {"role": "user", "content": "I am flying to Lisbon on the ninth of June."},
                {
                    "type": "function_call",
                    "call_id": "call_1",
                    "name": "find_hotel",
                    "arguments": '{"city": "Lisbon"}',
                },
                {"type": "function_call_output", "call_id": "call_1", "output": "Hotel Avenida"},
                {
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "id": "msg_1",
                    "content": [
                        {
                            "type": "output_text",
                            "text": "Hotel Avenida has a room.",
                            "annotations": [],
                        }
                    ],
                },
                {"type": "reasoning", "id": "rs_1", "summary": []},
            ]
        )
        cooking = SQLiteSession("cooking", str(path))
        await cooking.add_items(
            [
                {"role": "user", "content": "My sourdough starter is called Bubbles."},
                {"role": "assistant", "content": "Bubbles is a fine name for a starter."},
            ]
        )
        trip.close()
        cooking.close()

    asyncio.run(write())


def test_openai_agents_sessions_become_namespaces(store_url: str, tmp_path: Path) -> None:
    source = tmp_path / "agents.db"
    _agents_database(source)
    first = imported(str(source), "openai-agents-sqlite", store_url)
    assert first["recorded_count"] == 4
    by_name = {n["namespace"]: n for n in first["namespaces"]}
    assert set(by_name) == {"trip-planning", "cooking"}
    assert by_name["trip-planning"]["skipped_item_count"] == 1  # the reasoning item
    assert namespaces(store_url) == {"trip-planning": 2, "cooking": 2}
    assert "Bubbles" in recalled(store_url, "cooking", "sourdough starter name")[0]
    with opened(store_url, "trip-planning") as memory:
        reply = stored(memory)[1]
    assert reply.content == "Hotel Avenida has a room."
    assert reply.metadata["tool_calls"] == [
        {"name": "find_hotel", "arguments": '{"city": "Lisbon"}', "output": "Hotel Avenida"}
    ]
    again = imported(str(source), "openai-agents-sqlite", store_url)
    assert again["recorded_count"] == 0
    assert namespaces(store_url) == {"trip-planning": 2, "cooking": 2}


def test_openai_agents_into_one_namespace(store_url: str, tmp_path: Path) -> None:
    source = tmp_path / "agents.db"
    _agents_database(source)
    imported(str(source), "openai-agents-sqlite", store_url, "--namespace", "everything")
    assert namespaces(store_url) == {"everything": 4}


def test_a_corrupt_agents_database_changes_nothing(store_url: str, tmp_path: Path) -> None:
    before = seeded(store_url)
    source = tmp_path / "agents.db"
    _agents_database(source)
    with sqlite3.connect(source) as connection:
        connection.execute(
            "INSERT INTO agent_messages (session_id, message_data) VALUES ('cooking', '{oops')"
        )
    out = run("import", str(source), "--from", "openai-agents-sqlite", "--db", store_url, code=BAD)
    assert "agent_messages row 8" in out
    assert "not JSON" in out
    assert namespaces(store_url) == before
    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_text("hello " * 1000)
    out = run(
        "import", str(not_sqlite), "--from", "openai-agents-sqlite", "--db", store_url, code=BAD
    )
    assert "notes.txt" in out
    other = tmp_path / "other.db"
    sqlite3.connect(other).close()
    out = run("import", str(other), "--from", "openai-agents-sqlite", "--db", store_url, code=BAD)
    assert "no table 'agent_messages'" in out
    assert namespaces(store_url) == before


# -- LangChain SQLChatMessageHistory ------------------------------------------------------


def _langchain_history(connection: str, table: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the package announces its sunset
        from langchain_community.chat_message_histories import SQLChatMessageHistory
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    alice = SQLChatMessageHistory("alice", connection=connection, table_name=table)
    alice.add_messages(
        [
            HumanMessage("My daughter Mira starts violin lessons on Thursday."),
            AIMessage(
                "",
                tool_calls=[{"name": "calendar_add", "args": {"day": "Thursday"}, "id": "t1"}],
            ),
            ToolMessage("added", tool_call_id="t1"),
            AIMessage("I put Mira's violin lesson in your calendar."),
        ]
    )
    bob = SQLChatMessageHistory("bob", connection=connection, table_name=table)
    bob.add_messages([HumanMessage("I keep bees on the roof."), AIMessage("How many hives?")])
    for history in (alice, bob):
        history.engine.dispose()


def test_langchain_sqlite_history(store_url: str, tmp_path: Path) -> None:
    source = f"sqlite:///{tmp_path / 'history.db'}"
    _langchain_history(source, "message_store")
    first = imported(source, "langchain-sql", store_url)
    assert first["recorded_count"] == 4
    assert namespaces(store_url) == {"alice": 2, "bob": 2}
    assert "Mira" in recalled(store_url, "alice", "violin lessons")[0]
    with opened(store_url, "alice") as memory:
        reply = stored(memory)[1]
    assert reply.metadata["tool_calls"][0]["name"] == "calendar_add"
    assert reply.metadata["tool_calls"][0]["output"] == "added"
    assert imported(source, "langchain-sql", store_url)["recorded_count"] == 0
    # the file's path works as well as its URL
    assert imported(str(tmp_path / "history.db"), "langchain-sql", store_url)["recorded_count"] == 0


@pytest.mark.postgres
def test_langchain_postgres_history(pg_url: str, tmp_path: Path) -> None:
    table = f"history_{uuid.uuid4().hex[:8]}"
    source = pg_url.replace("postgresql://", "postgresql+psycopg://", 1)
    _langchain_history(source, table)
    db = str(tmp_path / "memory.db")
    try:
        first = imported(source, "langchain-sql", db, "--table", table)
        assert first["recorded_count"] == 4
        assert "bees" in recalled(db, "bob", "what lives on the roof")[0]
        assert imported(source, "langchain-sql", db, "--table", table)["recorded_count"] == 0
    finally:
        import psycopg

        with psycopg.connect(pg_url, autocommit=True) as connection:
            connection.execute(f"DROP TABLE IF EXISTS {table}")


def test_a_corrupt_langchain_history_changes_nothing(store_url: str, tmp_path: Path) -> None:
    before = seeded(store_url)
    path = tmp_path / "history.db"
    _langchain_history(f"sqlite:///{path}", "message_store")
    with sqlite3.connect(path) as connection:
        connection.execute(
            "INSERT INTO message_store (session_id, message) VALUES ('bob', '[1, 2]')"
        )
    out = run("import", str(path), "--from", "langchain-sql", "--db", store_url, code=BAD)
    assert "message_store row 7" in out
    assert "not a LangChain message" in out
    out = run(
        "import",
        str(path),
        "--from",
        "langchain-sql",
        "--table",
        "x; DROP",
        "--db",
        store_url,
        code=BAD,
    )
    assert "table name" in out
    out = run("import", "mysql://h/db", "--from", "langchain-sql", "--db", store_url, code=BAD)
    assert "sqlite:///PATH" in out
    assert namespaces(store_url) == before


# -- Letta agent files --------------------------------------------------------------------


def _letta_file(path: Path) -> None:
    """An agent file as Letta writes one (MemGPT-style: the reply goes by send_message),
    checked against the schema written from Letta's AgentFileSchema."""

    def message(n: int, role: str, content: Any, **more: Any) -> dict[str, Any]:
        at = f"2025-03-0{1 + n // 4}T10:{n:02d}:00Z"
        return {"id": f"message-{n}", "role": role, "content": content, "created_at": at} | more

    def reply(n: int, thought: str, said: str) -> dict[str, Any]:
        call = {
            "id": f"call-{n}",
            "type": "function",
            "function": {"name": "send_message", "arguments": json.dumps({"message": said})},
        }
        return message(n, "assistant", [{"type": "text", "text": thought}], tool_calls=[call])

    envelope = json.dumps({"type": "user_message", "message": "I adopted a greyhound named Pixel."})
    document = {
        "agents": [
            {
                "id": "agent-0",
                "name": "companion",
                "system": "You are a companion.",
                "agent_type": "memgpt_agent",
                "block_ids": ["block-0", "block-1"],
                "tool_ids": [],
                "in_context_message_ids": ["message-0", "message-2"],
                "messages": [
                    message(0, "system", [{"type": "text", "text": "You are a companion."}]),
                    message(1, "user", json.dumps({"type": "login", "last_login": "never"})),
                    message(2, "user", [{"type": "text", "text": envelope}]),
                    reply(3, "A new dog: worth remembering.", "Pixel is a lovely name!"),
                    message(4, "user", [{"type": "text", "text": "He runs very fast."}]),
                    message(
                        5,
                        "assistant",
                        [],
                        tool_calls=[
                            {
                                "id": "call-5",
                                "type": "function",
                                "function": {
                                    "name": "core_memory_append",
                                    "arguments": json.dumps({"label": "human", "content": "dog"}),
                                },
                            }
                        ],
                    ),
                    message(
                        6,
                        "tool",
                        [{"type": "text", "text": "ok"}],
                        tool_call_id="call-5",
                        tool_returns=[
                            {"tool_call_id": "call-5", "status": "success", "func_response": "ok"}
                        ],
                    ),
                    reply(7, "Greyhounds are fast.", "Greyhounds are the fastest dogs."),
                ],
                "files_agents": [],
                "group_ids": [],
            }
        ],
        "groups": [],
        "blocks": [
            {"id": "block-0", "label": "human", "value": "Owns a greyhound, Pixel.", "limit": 5000},
            {"id": "block-1", "label": "persona", "value": "A warm companion.", "limit": 5000},
        ],
        "files": [],
        "sources": [],
        "tools": [],
        "mcp_servers": [],
        "metadata": {"revision_id": "test"},
        "created_at": "2025-03-03T00:00:00Z",
    }
    schema = json.loads((DATA / "letta_agent_file.schema.json").read_text())
    jsonschema.validate(document, schema)
    path.write_text(json.dumps(document))


def test_letta_agent_file(store_url: str, tmp_path: Path) -> None:
    source = tmp_path / "companion.af"
    _letta_file(source)
    first = imported(str(source), "letta-agent-file", store_url)
    assert first["recorded_count"] == 4
    part = first["namespaces"][0]
    assert (part["namespace"], part["held_block_count"]) == ("companion", 2)
    assert part["skipped_item_count"] == 3  # the system prompt, the login, the tool's call
    with opened(store_url, "companion") as memory:
        said = [(m.role, m.content) for m in stored(memory)]
        context = memory.context_xml()
    assert said == [
        ("user", "I adopted a greyhound named Pixel."),
        ("assistant", "Pixel is a lovely name!"),
        ("user", "He runs very fast."),
        ("assistant", "Greyhounds are the fastest dogs."),
    ]
    assert '<human source="letta" urgency="NORMAL">Owns a greyhound, Pixel.</human>' in context
    assert "<persona" in context
    assert any("Pixel" in hit for hit in recalled(store_url, "companion", "the dog I adopted"))
    again = imported(str(source), "letta-agent-file", store_url)
    assert again["recorded_count"] == 0
    assert namespaces(store_url) == {"companion": 4}
    # forgetting the namespace takes its blocks with it
    run("forget", "namespace", "--yes", "--db", store_url, "-n", "companion")
    store = StoreSettings().open(store_url)
    try:
        assert require(store, ITEMS).get_items("companion", [HELD_BLOCKS_KEY], now=0) == []
    finally:
        store.close()


def test_a_corrupt_agent_file_changes_nothing(store_url: str, tmp_path: Path) -> None:
    before = seeded(store_url)
    source = tmp_path / "companion.af"
    _letta_file(source)
    document = json.loads(source.read_text())
    document["agents"][0]["block_ids"].append("block-9")
    source.write_text(json.dumps(document))
    out = run("import", str(source), "--from", "letta-agent-file", "--db", store_url, code=BAD)
    assert "block 'block-9'" in out
    source.write_text('{"agents": [')
    out = run("import", str(source), "--from", "letta-agent-file", "--db", store_url, code=BAD)
    assert "not a JSON agent file" in out
    source.write_text('{"name": "an agent of an older format"}')
    out = run("import", str(source), "--from", "letta-agent-file", "--db", store_url, code=BAD)
    assert "not a Letta agent file" in out
    assert namespaces(store_url) == before


def test_the_library_call(tmp_path: Path) -> None:
    source = tmp_path / "companion.af"
    _letta_file(source)
    store = StoreSettings().open(str(tmp_path / "memory.db"))
    try:
        report = import_memory(store, "letta-agent-file", str(source), namespace="pet-talk")
        assert report.recorded == 4
        assert [n.namespace for n in report.namespaces] == ["pet-talk"]
        again = import_memory(store, "letta-agent-file", str(source), namespace="pet-talk")
        assert again.recorded == 0
    finally:
        store.close()


def test_held_blocks_travel_with_copy(tmp_path: Path) -> None:
    source = tmp_path / "companion.af"
    _letta_file(source)
    first, second = str(tmp_path / "first.db"), str(tmp_path / "second.db")
    imported(str(source), "letta-agent-file", first)
    run("copy", first, second)
    with opened(second, "companion") as memory:
        assert '<human source="letta"' in memory.context_xml()


def test_text_that_is_not_unicode_is_refused(store_url: str, tmp_path: Path) -> None:
    """JSON can escape a lone surrogate; the import says so instead of failing on it."""
    before = seeded(store_url)
    source = tmp_path / "companion.af"
    _letta_file(source)
    text = source.read_text().replace("He runs very fast.", "He runs \\ud800 fast.")
    source.write_text(text)
    out = run("import", str(source), "--from", "letta-agent-file", "--db", store_url, code=BAD)
    assert "not valid Unicode" in out
    assert namespaces(store_url) == before
