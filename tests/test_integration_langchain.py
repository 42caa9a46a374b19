"""LangChain's own `RunnableWithMessageHistory` over `PartnerMemoryChatHistory`, with a
`ChatOpenAI` model served on loopback, on every SQL backend: each turn shows the model
the turns before it, after a restart and after rolling; `clear` forgets; two sessions
stay apart."""

from __future__ import annotations

from typing import Any

import pytest

from partner_memory.service import MemoryService
from tests.frameworks import (
    Model,
    delivers_the_facts,
    framework,
    remembers_across_restarts_and_rolling,
)

framework("langchain_core")
langchain_openai = framework("langchain_openai")

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder  # noqa: E402
from langchain_core.runnables import RunnablePassthrough  # noqa: E402
from langchain_core.runnables.history import RunnableWithMessageHistory  # noqa: E402

from partner_memory.integrations.langchain import (  # noqa: E402
    PartnerMemoryChatHistory,
    langchain_message,
    message_of,
    recalled_text,
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


def _recalling_chain(fake_llm: Any, service: MemoryService, user: str) -> Any:
    """The history, and what its retriever recalls for the question in the prompt."""
    history = PartnerMemoryChatHistory(user, memory=service)
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "Be brief.\n{recalled}"),
            MessagesPlaceholder("history"),
            ("human", "{question}"),
        ]
    )
    model = langchain_openai.ChatOpenAI(
        model="local", base_url=fake_llm.base_url, api_key="local", max_retries=0
    )
    found = (lambda asked: asked["question"]) | history.retriever() | recalled_text
    return RunnableWithMessageHistory(
        RunnablePassthrough.assign(recalled=found) | prompt | model,
        lambda session_id: history,
        input_messages_key="question",
        history_messages_key="history",
    )


def _ask(chain: Any, user: str, question: str) -> str:
    config = {"configurable": {"session_id": user}}
    return str(chain.invoke({"question": question}, config=config).content)


# langchain-core 1.x marks the runner deprecated in favour of LangGraph's persistence (which
# a chat message history is for); it is still the runner of one
@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_turns_survive_a_restart_and_rolling_and_stay_apart(
    store_url: str, fake_llm: Any, model: Model
) -> None:
    def ask(service: MemoryService, user: str, text: str) -> str:
        return _ask(_chain(fake_llm, service), user, text)

    remembers_across_restarts_and_rolling(store_url, model, ask)


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_the_facts_of_a_long_conversation_reach_the_model(
    store_url: str, fake_llm: Any, model: Model
) -> None:
    """45 turns, 29 facts, a question about each: the history's retriever brings back
    what rolled away, and not what the history shows."""

    def ask(service: MemoryService, user: str, text: str) -> str:
        return _ask(_recalling_chain(fake_llm, service, user), user, text)

    delivers_the_facts(store_url, model, ask)


def test_the_context_comes_first_and_clear_forgets(store_url: str) -> None:
    with MemoryService.open(store_url) as service:
        history = PartnerMemoryChatHistory("user-7", memory=service)
        history.add_messages([HumanMessage("My cat is called Luna"), AIMessage("Noted")])
        assert service.memory("user-7").roll_now(idle=True) is not None
        history.add_messages([HumanMessage("And a dog")])
        first, *rest = history.messages
        assert isinstance(first, SystemMessage)
        assert "Luna" in str(first.content)
        assert rest == [HumanMessage("And a dog")]
        history.clear()
        assert history.messages == []


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
