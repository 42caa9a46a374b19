"""Microsoft Agent Framework's own `Agent` with `PartnerMemoryHistoryProvider` and an
`OpenAIChatCompletionClient` served on loopback, on every SQL backend: each run shows
the model what the session said before, after a restart and after rolling; two
sessions stay apart; a session forgotten is gone; messages come back exactly."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from partner_memory import InvalidInputError
from partner_memory.service import MemoryService
from tests.frameworks import (
    Model,
    delivers_the_facts,
    framework,
    remembers_across_restarts_and_rolling,
)

framework("agent_framework")
framework("agent_framework_openai")

from agent_framework import Agent, Content  # noqa: E402
from agent_framework import Message as FrameworkMessage  # noqa: E402
from agent_framework.openai import OpenAIChatCompletionClient  # noqa: E402

from partner_memory.integrations.agent_framework import (  # noqa: E402
    PartnerMemoryContextProvider,
    PartnerMemoryHistoryProvider,
    framework_message,
    message_of,
)


def _agent(fake_llm: Any, service: MemoryService) -> Any:
    client = OpenAIChatCompletionClient("local", api_key="local", base_url=fake_llm.base_url)
    provider = PartnerMemoryHistoryProvider(memory=service)
    return Agent(client, "Be brief.", context_providers=[provider])


def test_sessions_survive_a_restart_and_rolling_and_stay_apart(
    store_url: str, fake_llm: Any, model: Model
) -> None:
    def ask(service: MemoryService, user: str, text: str) -> str:
        agent = _agent(fake_llm, service)
        session = agent.create_session(session_id=user)  # new each turn: only memory remembers
        return str(asyncio.run(agent.run(text, session=session)).text)

    remembers_across_restarts_and_rolling(store_url, model, ask)


def test_the_context_provider_recalls_for_the_input_and_records(
    store_url: str, fake_llm: Any, model: Model
) -> None:
    client = OpenAIChatCompletionClient("local", api_key="local", base_url=fake_llm.base_url)
    with MemoryService.open(store_url) as service:
        agent = Agent(
            client, "Be brief.", context_providers=[PartnerMemoryContextProvider(memory=service)]
        )

        def ask(user: str, text: str) -> None:
            asyncio.run(agent.run(text, session=agent.create_session(session_id=user)))

        ask("user-7", "My cat is called Luna")
        ask("user-7", "What is my cat called?")  # nothing replayed: recall finds it
        assert "recalled_messages" in model.seen[-1]
        assert "My cat is called Luna" in model.seen[-1]
        ask("user-8", "What is my cat called?")
        assert "Luna" not in model.seen[-1]
        assert len(service.memory("user-7").window()) == 4  # each turn recorded once

        both = Agent(
            client,
            "Be brief.",
            context_providers=[
                PartnerMemoryHistoryProvider(memory=service),
                PartnerMemoryContextProvider(memory=service, record=False),
            ],
        )
        asyncio.run(both.run("And a dog?", session=both.create_session(session_id="user-7")))
        assert len(service.memory("user-7").window()) == 6  # the history provider's, once


def test_a_run_without_a_session_id_is_refused(tmp_path: Any) -> None:
    provider = PartnerMemoryHistoryProvider(db=str(tmp_path / "memory.db"))
    try:
        with pytest.raises(InvalidInputError, match="session_id"):
            asyncio.run(provider.get_messages(None))
    finally:
        provider.close()


def test_any_message_comes_back_exactly() -> None:
    call = FrameworkMessage(
        "assistant", [Content.from_function_call(call_id="c1", name="weather", arguments="{}")]
    )
    result = FrameworkMessage("tool", [Content.from_function_result(call_id="c1", result="sunny")])
    for message in (FrameworkMessage("user", ["hi"]), call, result):
        assert framework_message(message_of(message)).to_dict() == message.to_dict()
    assert message_of(FrameworkMessage("user", ["hi"])).text == "hi"


def test_messages_saved_again_are_stored_once(store_url: str) -> None:
    """As agent-framework-core's `InMemoryHistoryProvider.save_messages` (its
    `filter_new_messages`): the same messages saved twice are stored once, a whole
    conversation sent again adds only its new messages, a repeated user input is a
    new turn, and a message is known by its id."""
    with MemoryService.open(store_url) as service:
        provider = PartnerMemoryHistoryProvider(memory=service)
        two = [FrameworkMessage("user", ["hi"]), FrameworkMessage("assistant", ["hello"])]
        asyncio.run(provider.save_messages("s1", two))
        asyncio.run(provider.save_messages("s1", two))
        assert [m.text for m in asyncio.run(provider.get_messages("s1"))] == ["hi", "hello"]

        whole = [*two, FrameworkMessage("user", ["more"]), FrameworkMessage("assistant", ["ok"])]
        asyncio.run(provider.save_messages("s1", whole))
        texts = [m.text for m in asyncio.run(provider.get_messages("s1"))]
        assert texts == ["hi", "hello", "more", "ok"]
        for turn in range(3):  # a caller resending the conversation each turn: 2N, not N(N+1)
            whole += [FrameworkMessage("user", [f"q{turn}"]), FrameworkMessage("assistant", ["a"])]
            asyncio.run(provider.save_messages("s1", whole))
        assert len(service.memory("s1").window()) == len(whole) == 10

        asyncio.run(provider.save_messages("s2", [FrameworkMessage("user", ["yes"])]))
        asyncio.run(provider.save_messages("s2", [FrameworkMessage("user", ["yes"])]))
        assert [m.text for m in asyncio.run(provider.get_messages("s2"))] == ["yes", "yes"]

        known = [
            FrameworkMessage("user", ["with an id"], message_id="m-1"),
            FrameworkMessage("assistant", ["and a reply"], message_id="m-2"),
        ]
        asyncio.run(provider.save_messages("s3", known))
        assert service.memory("s3").roll_now(idle=True) is not None  # the window is empty
        asyncio.run(provider.save_messages("s3", [*known, FrameworkMessage("user", ["new"])]))
        assert [w.message.text for w in service.memory("s3").window()] == ["new"]


def test_a_session_is_forgotten_through_the_provider(store_url: str) -> None:
    with MemoryService.open(store_url) as service:
        history = PartnerMemoryHistoryProvider(memory=service)
        context = PartnerMemoryContextProvider(memory=service)
        asyncio.run(history.save_messages("s1", [FrameworkMessage("user", ["Luna is my cat"])]))
        asyncio.run(history.save_messages("s2", [FrameworkMessage("user", ["Rex is my dog"])]))
        asyncio.run(history.clear("s1"))
        assert asyncio.run(history.get_messages("s1")) == []
        assert [m.text for m in asyncio.run(history.get_messages("s2"))] == ["Rex is my dog"]
        asyncio.run(context.clear("s2"))
        assert asyncio.run(history.get_messages("s2")) == []
        with pytest.raises(InvalidInputError, match="session_id"):
            asyncio.run(history.clear(None))


@pytest.mark.parametrize("provider", ["history", "context"])
def test_the_facts_of_a_long_conversation_reach_the_model(
    store_url: str, fake_llm: Any, model: Model, provider: str
) -> None:
    """45 turns, 29 facts, a question about each: recall brings back what rolled away."""
    client = OpenAIChatCompletionClient("local", api_key="local", base_url=fake_llm.base_url)

    def ask(service: MemoryService, user: str, text: str) -> str:
        chosen = (
            PartnerMemoryHistoryProvider(memory=service)
            if provider == "history"
            else PartnerMemoryContextProvider(memory=service)
        )
        agent = Agent(client, "Be brief.", context_providers=[chosen])
        return str(asyncio.run(agent.run(text, session=agent.create_session(session_id=user))).text)

    # the context provider shows no recent messages: recall lists them too
    delivers_the_facts(store_url, model, ask, repeats_recent=provider == "context")
