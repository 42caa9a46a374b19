"""LangChain's own `RunnableWithMessageHistory` over `PartnerMemoryChatHistory`, with a
`ChatOpenAI` model served on loopback, on every SQL backend: each turn shows the model
the turns before it, after a restart and after rolling; `clear` forgets; two sessions
stay apart."""

from __future__ import annotations

from typing import Any

import pytest

from partner_memory.service import MemoryService
from tests.frameworks import Model, framework

framework("langchain_core")
langchain_openai = framework("langchain_openai")

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder  # noqa: E402
from langchain_core.runnables.history import RunnableWithMessageHistory  # noqa: E402

from partner_memory.integrations.langchain import (  # noqa: E402
    PartnerMemoryChatHistory,
    langchain_message,
    message_of,
)


def _chain(fake_llm: Any, service: MemoryService) -> Any:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Be brief."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    model = langchain_openai.ChatOpenAI(
        model="local", base_url=fake_llm.base_url, api_key="local", max_retries=0
    )
    return RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: PartnerMemoryChatHistory(session_id, memory=service),
        input_messages_key="question",
        history_messages_key="history",
    )


def _ask(chain: Any, user: str, question: str) -> str:
    config = {"configurable": {"session_id": user}}
    return str(chain.invoke({"question": question}, config=config).content)


@pytest.fixture
def model(fake_llm: Any) -> Model:
    fake_llm.respond = Model()
    return fake_llm.respond  # type: ignore[no-any-return]


# langchain-core 1.x marks the runner deprecated in favour of LangGraph's persistence (which
# a chat message history is for); it is still the runner of one
@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_turns_survive_a_restart_and_rolling_and_stay_apart(
    store_url: str, fake_llm: Any, model: Model
) -> None:
    with MemoryService.open(store_url) as service:
        chain = _chain(fake_llm, service)
        assert _ask(chain, "user-7", "My cat is called Luna") == "answer 1"
        _ask(chain, "user-7", "What is my cat called?")
        assert "Luna" in model.seen[-1]
        assert "answer 1" in model.seen[-1]
        _ask(chain, "user-8", "What is my cat called?")
        assert "Luna" not in model.seen[-1]

    with MemoryService.open(store_url) as service:  # a restart
        chain = _chain(fake_llm, service)
        _ask(chain, "user-7", "Remind me of her name")
        assert "Luna" in model.seen[-1]
        assert service.memory("user-7").roll_now(idle=True) is not None
        _ask(chain, "user-7", "And her name again?")
        assert "dialog_history" in model.seen[-1]
        assert "Luna" in model.seen[-1]
        history = PartnerMemoryChatHistory("user-7", memory=service)
        first = history.messages[0]
        assert isinstance(first, SystemMessage)
        assert "Luna" in str(first.content)
        history.clear()
        assert history.messages == []
        _ask(chain, "user-7", "What is my cat called?")
        assert "Luna" not in model.seen[-1]


def test_any_message_comes_back_exactly() -> None:
    call = AIMessage("", tool_calls=[{"name": "weather", "args": {}, "id": "c1"}])
    for message in (
        HumanMessage("hi"),
        AIMessage("hello", id="m1"),
        SystemMessage("Be kind"),
        ToolMessage("sunny", tool_call_id="c1"),
        call,
        HumanMessage([{"type": "text", "text": "look"}]),
    ):
        assert langchain_message(message_of(message)) == message
    assert message_of(HumanMessage("hi")).metadata == {}
    assert message_of(ToolMessage("sunny", tool_call_id="c1")).text == "sunny"
