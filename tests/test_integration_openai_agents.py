"""The OpenAI Agents SDK's own `Runner` with `PartnerMemorySession`, on every SQL backend
and through a remote `serve`: what the model is shown on each turn holds the turns
before it, after a restart and after rolling; a popped or cleared item is forgotten;
two sessions stay apart."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from partner_memory import InvalidInputError
from partner_memory.client import MemoryClient
from partner_memory.service import MemoryService
from tests.frameworks import Model, delivers_the_facts, framework
from tests.http_server import Server

agents = framework("agents")
openai = framework("openai")

from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner  # noqa: E402

from partner_memory.integrations.openai_agents import (  # noqa: E402
    PartnerMemorySession,
    item_of,
    message_of,
)

agents.set_tracing_disabled(True)


def _agent(fake_llm: Any) -> Any:
    client = openai.AsyncOpenAI(base_url=fake_llm.base_url, api_key="local", max_retries=0)
    return Agent(
        name="assistant",
        instructions="Be brief.",
        model=OpenAIChatCompletionsModel(model="local", openai_client=client),
    )


def _ask(agent: Any, session: PartnerMemorySession, text: str) -> str:
    result = asyncio.run(Runner.run(agent, text, session=session))
    return str(result.final_output)


def test_turns_survive_a_restart_and_rolling_and_stay_apart(
    store_url: str, fake_llm: Any, model: Model
) -> None:
    agent = _agent(fake_llm)
    with MemoryService.open(store_url) as service:
        session = PartnerMemorySession("user-7", memory=service)
        assert _ask(agent, session, "My cat is called Luna") == "answer 1"
        _ask(agent, session, "What is my cat called?")
        assert "Luna" in model.seen[-1]
        assert "answer 1" in model.seen[-1]
        other = PartnerMemorySession("user-8", memory=service)
        _ask(agent, other, "What is my cat called?")
        assert "Luna" not in model.seen[-1]
        session.close()  # handed a service: leaves it open
        assert service.memory("user-7").window()

    with MemoryService.open(store_url) as service:  # a restart
        session = PartnerMemorySession("user-7", memory=service)
        _ask(agent, session, "Remind me of her name")
        assert "Luna" in model.seen[-1]
        items = asyncio.run(session.get_items())
        assert [message_of(i).text for i in items[:2]] == ["My cat is called Luna", "answer 1"]

        rolled = service.memory("user-7").roll_now(idle=True)  # all of it
        assert rolled is not None
        assert service.memory("user-7").window() == []
        _ask(agent, session, "And her name again?")
        assert "dialog_history" in model.seen[-1]
        assert "Luna" in model.seen[-1]
        assert asyncio.run(session.get_items(limit=1))[0]["role"] == "assistant"


def test_popped_and_cleared_items_are_forgotten(
    tmp_path: Path, fake_llm: Any, model: Model
) -> None:
    agent = _agent(fake_llm)
    session = PartnerMemorySession("user-7", db=str(tmp_path / "memory.db"))
    try:
        _ask(agent, session, "My cat is called Luna")
        _ask(agent, session, "My dog is called Rex")
        popped = asyncio.run(session.pop_item())
        assert popped is not None
        assert message_of(popped).text == "answer 2"
        asyncio.run(session.pop_item())  # the question about Rex
        _ask(agent, session, "Which pets do I have?")
        assert "Luna" in model.seen[-1]
        assert "Rex" not in model.seen[-1]
        asyncio.run(session.clear_session())
        assert asyncio.run(session.get_items()) == []
        assert asyncio.run(session.pop_item()) is None
        _ask(agent, session, "Which pets do I have?")
        assert "Luna" not in model.seen[-1]
    finally:
        session.close()


def test_a_remote_serve_through_the_client(tmp_path: Path, fake_llm: Any, model: Model) -> None:
    agent = _agent(fake_llm)
    server = Server(str(tmp_path / "remote.db"))
    try:
        with MemoryClient(server.url, "user-7") as client:
            session = PartnerMemorySession("user-7", memory=client)
            _ask(agent, session, "My cat is called Luna")
            _ask(agent, session, "What is my cat called?")
            assert "Luna" in model.seen[-1]
            with pytest.raises(InvalidInputError, match="bound to namespace 'user-7'"):
                PartnerMemorySession("user-8", memory=client)
    finally:
        server.stop()


def test_any_item_comes_back_exactly() -> None:
    call = {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "sunny"}
    said = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "It is sunny", "annotations": []}],
    }
    for item in (call, output, said, {"role": "developer", "content": "Be kind"}):
        assert item_of(message_of(item)) == item
    assert message_of(said).text == "It is sunny"
    assert message_of(call).text == "called weather({})"
    plain = message_of({"role": "user", "content": "hi"})
    assert (plain.role, plain.text, plain.metadata) == ("user", "hi", {})


def test_get_items_with_a_limit_gives_the_newest_items_as_stored(tmp_path: Path) -> None:
    """Mirrors openai/openai-agents-python tests/memory/test_session.py
    test_sqlite_session_get_items_with_limit, with a tool call among the items: the
    newest `limit` items as stored, an output whose call is cut off included (the
    runner drops it, as for `SQLiteSession`)."""
    session = PartnerMemorySession("user-7", db=str(tmp_path / "memory.db"))
    try:
        items: list[Any] = [
            {"role": "user", "content": "Message 1"},
            {"role": "assistant", "content": "Response 1"},
            {"role": "user", "content": "Message 2"},
            {"role": "assistant", "content": "Response 2"},
            {"role": "user", "content": "Message 3"},
            {"role": "assistant", "content": "Response 3"},
        ]
        asyncio.run(session.add_items(items))
        assert asyncio.run(session.get_items()) == items
        assert asyncio.run(session.get_items(limit=2)) == items[-2:]
        assert asyncio.run(session.get_items(limit=4)) == items[-4:]
        assert asyncio.run(session.get_items(limit=10)) == items
        assert asyncio.run(session.get_items(limit=0)) == []

        call = {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"}
        output = {"type": "function_call_output", "call_id": "c1", "output": "sunny"}
        asyncio.run(session.add_items([call, output]))
        assert asyncio.run(session.get_items(limit=1)) == [output]
        assert asyncio.run(session.get_items(limit=2)) == [call, output]
        custom = {"type": "custom_tool_call", "call_id": "c2", "name": "grep", "input": "x"}
        result = {"type": "custom_tool_call_output", "call_id": "c2", "output": "found"}
        asyncio.run(session.add_items([custom, result]))
        assert len(asyncio.run(session.get_items(limit=3))) == 3
    finally:
        session.close()


def test_db_and_memory_together_are_refused(tmp_path: Path) -> None:
    with (
        MemoryService.open(str(tmp_path / "m.db")) as service,
        pytest.raises(InvalidInputError, match="not both"),
    ):
        PartnerMemorySession("u", db=str(tmp_path / "m.db"), memory=service)


def test_settings_and_closing_as_sqlite_session_has_them(tmp_path: Path) -> None:
    """Mirrors openai/openai-agents-python tests/memory/test_session.py:
    test_session_settings_default, test_session_settings_constructor,
    test_session_settings_constructor_normalizes_dictionary,
    test_session_settings_rejects_unknown_dictionary_fields and
    test_sqlite_session_closed_rejects_empty_add_items."""
    from agents import SessionSettings

    database = str(tmp_path / "memory.db")
    session = PartnerMemorySession("defaults", db=database)
    assert isinstance(session.session_settings, SessionSettings)
    assert session.session_settings.limit is None
    session.close()
    with pytest.raises(RuntimeError, match="is closed"):
        asyncio.run(session.add_items([]))
    with pytest.raises(RuntimeError, match="is closed"):
        asyncio.run(session.get_items())
    given = PartnerMemorySession("given", db=database, session_settings=SessionSettings(limit=5))
    assert given.session_settings.limit == 5
    given.close()
    mapped = PartnerMemorySession("mapped", db=database, session_settings={"limit": 0})
    assert isinstance(mapped.session_settings, SessionSettings)
    assert mapped.session_settings.limit == 0
    assert mapped.session_settings.resolve({"limit": 4}).limit == 4
    mapped.close()
    with pytest.raises(TypeError, match="limitt"):
        PartnerMemorySession("bad", db=database, session_settings={"limitt": 1})


def test_the_facts_of_a_long_conversation_reach_the_model(
    store_url: str, fake_llm: Any, model: Model
) -> None:
    """45 turns, 29 facts, a question about each, `recall_input` as the runner's
    session_input_callback: recall brings back what rolled away, and is never stored."""
    agent = _agent(fake_llm)

    def ask(service: MemoryService, user: str, text: str) -> str:
        session = PartnerMemorySession(user, memory=service)
        config = RunConfig(session_input_callback=session.recall_input)
        result = asyncio.run(Runner.run(agent, text, session=session, run_config=config))
        return str(result.final_output)

    delivers_the_facts(store_url, model, ask)
    with MemoryService.open(store_url) as service:
        memory = service.memory("user-7")
        said = [w.message.text for w in memory.window()]
        for unit in memory.core.list_units().units:
            said += [m.text for m in memory.core.get_memory_unit(unit.id).conversation_messages]
        assert len(said) > 100
        assert not any("<recalled_messages>" in text for text in said)
