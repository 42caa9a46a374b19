"""A Pydantic AI `Agent` with the `partner_memory_history` capability and an
`OpenAIChatModel` served on loopback, on every SQL backend: each run shows the model
what the runs before it said, after a restart and after rolling; two users stay
apart; every message comes back exactly."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from partner_memory.service import MemoryService
from tests.frameworks import (
    Model,
    delivers_the_facts,
    framework,
    remembers_across_restarts_and_rolling,
)

framework("pydantic_ai")

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.openai import OpenAIChatModel  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

from partner_memory.integrations.pydantic_ai import (  # noqa: E402
    message_of,
    model_message,
    partner_memory_history,
)


def _agent(fake_llm: Any, service: MemoryService, user: str) -> Agent[None, str]:
    provider = OpenAIProvider(base_url=fake_llm.base_url, api_key="local")
    return Agent(
        OpenAIChatModel("local", provider=provider),
        instructions="Be brief.",
        capabilities=[partner_memory_history(user, memory=service)],
    )


def _asker(fake_llm: Any) -> Callable[[MemoryService, str, str], str]:
    """A run of a new agent for the user, over the service."""

    def ask(service: MemoryService, user: str, text: str) -> str:
        return asyncio.run(_agent(fake_llm, service, user).run(text)).output

    return ask


def test_runs_survive_a_restart_and_rolling_and_stay_apart(
    store_url: str, fake_llm: Any, model: Model
) -> None:
    remembers_across_restarts_and_rolling(store_url, model, _asker(fake_llm))


def test_the_facts_of_a_long_conversation_reach_the_model(
    store_url: str, fake_llm: Any, model: Model
) -> None:
    """45 turns, 29 facts, a question about each: recall brings back what rolled away."""
    delivers_the_facts(store_url, model, _asker(fake_llm))


def test_any_message_comes_back_exactly() -> None:
    call = ModelResponse(parts=[ToolCallPart("weather", {"city": "Kyoto"}, tool_call_id="c1")])
    for message in (
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(parts=[TextPart("hello")]),
        call,
        ModelRequest(parts=[ToolReturnPart("weather", "sunny", tool_call_id="c1")]),
    ):
        assert model_message(message_of(message)) == message
    assert message_of(call).text == 'called weather({"city":"Kyoto"})'
    assert message_of(ModelRequest(parts=[UserPromptPart("hi")])).role == "user"


def test_a_conversation_is_forgotten_through_the_capability(
    store_url: str, fake_llm: Any, model: Model
) -> None:
    with MemoryService.open(store_url) as service:
        asyncio.run(_agent(fake_llm, service, "user-7").run("My cat is called Luna"))
        asyncio.run(_agent(fake_llm, service, "user-8").run("My dog is called Rex"))
        capability = partner_memory_history("user-7", memory=service)
        capability.clear()
        assert service.memory("user-7").window() == []
        asyncio.run(_agent(fake_llm, service, "user-7").run("What is my cat called?"))
        assert "Luna" not in model.seen[-1]
        asyncio.run(partner_memory_history("user-8", memory=service).aclear())
        assert service.memory("user-8").window() == []
