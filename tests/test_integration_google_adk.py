"""A Google ADK `Runner` with `PartnerMemoryService` as its memory service, an
`LlmAgent` with the framework's `preload_memory` tool, saving each session to memory
after the agent runs, on every SQL backend: a new ADK session shows the model what
earlier sessions said, after a restart and after rolling; two users (and two apps)
stay apart; what the framework deletes is forgotten and never recorded again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from partner_memory.errors import InvalidInputError
from partner_memory.service import MemoryService
from tests.frameworks import Model, delivers_the_facts, framework

framework("google.adk")

from examples.google_adk_model import ChatCompletions  # noqa: E402
from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.agents.callback_context import CallbackContext  # noqa: E402
from google.adk.events.event import Event  # noqa: E402
from google.adk.memory.memory_entry import MemoryEntry  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.sessions import InMemorySessionService  # noqa: E402
from google.adk.tools import preload_memory  # noqa: E402
from google.genai import types  # noqa: E402

from partner_memory.integrations.google_adk import (  # noqa: E402
    PartnerMemoryService,
    message_of,
    namespace_of,
)


async def _save(callback_context: CallbackContext) -> None:
    await callback_context.add_session_to_memory()


def _ask(
    fake_llm: Any, memory: PartnerMemoryService, user: str, text: str, app: str = "cats"
) -> str:
    """One turn in a new ADK session (a new session service: what links the turns is
    memory alone)."""
    agent = LlmAgent(
        name="helper",
        model=ChatCompletions(model="local", base_url=fake_llm.base_url),
        instruction="Be brief.",
        tools=[preload_memory],
        after_agent_callback=_save,
    )

    async def run() -> str:
        sessions = InMemorySessionService()
        runner = Runner(agent=agent, app_name=app, session_service=sessions, memory_service=memory)
        session = await sessions.create_session(app_name=app, user_id=user)
        said = ""
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for event in runner.run_async(
            user_id=user, session_id=session.id, new_message=message
        ):
            if event.content and event.content.parts and event.content.parts[0].text:
                said = event.content.parts[0].text
        await runner.close()
        return said

    return asyncio.run(run())


def test_the_facts_of_a_long_conversation_reach_the_model(
    store_url: str, fake_llm: Any, model: Model
) -> None:
    """45 turns, 29 facts, a question about each, each turn a new ADK session:
    `preload_memory` searches memory with the question and recall answers it (a new
    session holds no recent messages, so nothing says what recall may leave out)."""

    def ask(service: MemoryService, user: str, text: str) -> str:
        return _ask(fake_llm, PartnerMemoryService(memory=service), user, text)

    delivers_the_facts(store_url, model, ask, repeats_recent=True)


def test_sessions_remember_across_restarts_and_rolling_and_users_stay_apart(
    store_url: str, fake_llm: Any, model: Model
) -> None:
    with MemoryService.open(store_url) as service:
        memory = PartnerMemoryService(memory=service)
        assert _ask(fake_llm, memory, "user-7", "My cat is called Luna") == "answer 1"
        _ask(fake_llm, memory, "user-7", "What is my cat called?")
        assert "Luna" in model.seen[-1]
        _ask(fake_llm, memory, "user-8", "What is my cat called?")
        assert "Luna" not in model.seen[-1]
        _ask(fake_llm, memory, "user-7", "What is my cat called?", app="dogs")
        assert "Luna" not in model.seen[-1]

    with MemoryService.open(store_url) as service:  # a restart
        memory = PartnerMemoryService(memory=service)
        _ask(fake_llm, memory, "user-7", "Remind me what my cat is called")
        assert "Luna" in model.seen[-1]
        user_7 = service.memory(namespace_of("cats", "user-7"))
        said = [w.message for w in user_7.window()]
        assert [m.text for m in said[:2]] == ["My cat is called Luna", "answer 1"]
        assert said[0].speaker == "user"
        assert said[1].speaker == "helper"
        assert user_7.roll_now(idle=True) is not None
        _ask(fake_llm, memory, "user-7", "And my cat's name again?")
        assert "dialog_history" in model.seen[-1]

        found = asyncio.run(
            memory.search_memory(app_name="cats", user_id="user-7", query="cat Luna")
        )
        luna = [m for m in found.memories if m.id == said[0].id]
        assert luna
        assert luna[0].author == "user"
        asyncio.run(memory.delete_memory(app_name="cats", user_id="user-7", memory_id=said[0].id))
        found = asyncio.run(memory.search_memory(app_name="cats", user_id="user-7", query="Luna"))
        assert not [m for m in found.memories if m.id == said[0].id]
        assert not any("Luna" in m.content.parts[0].text for m in found.memories)  # summary too


def test_a_session_added_again_records_only_what_is_new_and_never_what_was_deleted(
    store_url: str,
) -> None:
    from google.adk.sessions.session import Session

    def event(author: str, text: str) -> Event:
        return Event(
            author=author,
            content=types.Content(
                role="user" if author == "user" else "model", parts=[types.Part(text=text)]
            ),
        )

    events = [event("user", "I'm off to Kyoto in April"), event("helper", "Noted")]
    session = Session(id="s1", app_name="travel", user_id="mei", events=events)
    with MemoryService.open(store_url) as service:
        memory = PartnerMemoryService(memory=service)
        asyncio.run(memory.add_session_to_memory(session))
        asyncio.run(memory.add_session_to_memory(session))
        handle = service.memory(namespace_of("travel", "mei"))
        assert [w.message.id for w in handle.window()] == [e.id for e in events]
        asyncio.run(memory.delete_memory(app_name="travel", user_id="mei", memory_id=events[1].id))
        session.events.append(event("user", "And Osaka in May"))
        asyncio.run(memory.add_session_to_memory(session))
        assert [w.message.text for w in handle.window()] == [
            "I'm off to Kyoto in April",
            "And Osaka in May",
        ]
        assert handle.roll_now(idle=True) is not None
        asyncio.run(memory.add_session_to_memory(session))  # now held by a unit
        assert handle.window() == []
        asyncio.run(memory.delete_memory(app_name="travel", user_id="mei", memory_id="no-such-id"))

        asyncio.run(
            memory.add_memory(
                app_name="travel",
                user_id="mei",
                memories=[
                    MemoryEntry(
                        content=types.Content(
                            role="user", parts=[types.Part(text="Prefers window seats")]
                        ),
                        author="mei",
                        timestamp="2026-03-01T10:00:00+00:00",
                    )
                ],
                custom_metadata={"source": "profile"},
            )
        )
        written = handle.window()[0].message
        assert (written.text, written.speaker, written.metadata["source"]) == (
            "Prefers window seats",
            "mei",
            "profile",
        )
        found = asyncio.run(
            memory.search_memory(app_name="travel", user_id="mei", query="window seats")
        )
        assert any(
            m.id == written.id and m.timestamp == "2026-03-01T10:00:00+00:00"
            for m in found.memories
        )
        found = asyncio.run(memory.search_memory(app_name="travel", user_id="mei", query="Kyoto"))
        slices = [m for m in found.memories if m.id and m.id.startswith("slice:")]
        assert slices
        assert slices[0].author == "memory"
        asyncio.run(memory.delete_memory(app_name="travel", user_id="mei", memory_id=slices[0].id))
        found = asyncio.run(memory.search_memory(app_name="travel", user_id="mei", query="Kyoto"))
        assert not any(
            "Kyoto" in m.content.parts[0].text for m in found.memories if m.content.parts
        )


def test_scopes_and_events_map_without_collisions() -> None:
    assert namespace_of("a/b", "c") != namespace_of("a", "b/c")
    with pytest.raises(InvalidInputError, match="user_id"):
        namespace_of("app", "")
    thought = Event(
        author="helper",
        content=types.Content(role="model", parts=[types.Part(text="hmm", thought=True)]),
    )
    assert message_of(thought, "s") is None
    call = Event(
        author="helper",
        content=types.Content(
            role="model", parts=[types.Part(function_call=types.FunctionCall(name="f", args={}))]
        ),
    )
    assert message_of(call, "s") is None
    with pytest.raises(InvalidInputError, match="k must be"):
        PartnerMemoryService(memory=None, db=None, k=0)


def _upstream_sessions() -> list[Any]:
    """The sessions of google/adk-python tests/unittests/memory/
    test_in_memory_memory_service.py (MOCK_SESSION_1, _2 and _DIFFERENT_USER)."""
    from google.adk.sessions.session import Session

    def said(event_id: str, author: str, text: str | None, at: float) -> Event:
        content = types.Content(parts=[types.Part(text=text)]) if text else None
        return Event(
            id=event_id, invocation_id=f"i-{event_id}", author=author, timestamp=at, content=content
        )

    sessions = [
        ("test-user", "session-1", [
            said("event-1a", "user", "The ADK is a great toolkit.", 12345),
            said("event-1b", "user", None, 12346),
            said("event-1c", "model", "I agree. The Agent Development Kit (ADK) rocks!", 12347),
        ]),
        ("test-user", "session-2", [said("event-2a", "user", "I like to code in Python.", 54321)]),
        ("another-user", "session-3", [said("event-3a", "user", "This is a secret.", 60000)]),
    ]  # fmt: skip
    return [
        Session(app_name="test-app", user_id=user, id=session_id, events=events)
        for user, session_id, events in sessions
    ]


def test_search_returns_only_what_matches_the_query(store_url: str) -> None:
    """Mirrors google/adk-python tests/unittests/memory/test_in_memory_memory_service.py:
    test_search_memory_simple_match, test_search_memory_case_insensitive_match,
    test_search_memory_multiple_matches, test_search_memory_no_match and
    test_search_memory_is_scoped_by_user (only the fixture differs)."""
    with MemoryService.open(store_url) as service:
        memory = PartnerMemoryService(memory=service)
        for session in _upstream_sessions():
            asyncio.run(memory.add_session_to_memory(session))

        def texts(query: str, user: str = "test-user") -> list[str]:
            found = asyncio.run(
                memory.search_memory(app_name="test-app", user_id=user, query=query)
            )
            return [m.content.parts[0].text for m in found.memories]

        assert texts("Python") == ["I like to code in Python."]
        found = asyncio.run(
            memory.search_memory(app_name="test-app", user_id="test-user", query="Python")
        )
        assert found.memories[0].author == "user"
        assert texts("development") == ["I agree. The Agent Development Kit (ADK) rocks!"]
        assert set(texts("How about ADK?")) == {
            "The ADK is a great toolkit.",
            "I agree. The Agent Development Kit (ADK) rocks!",
        }
        assert texts("nonexistent") == []
        assert texts("zzznomatch") == []
        assert texts("secret") == []
        assert texts("secret", "another-user") == ["This is a secret."]

        # once something rolled, what matches comes after the context, with its slice
        assert service.memory(namespace_of("test-app", "test-user")).roll_now(idle=True)
        found = asyncio.run(
            memory.search_memory(app_name="test-app", user_id="test-user", query="Python")
        )
        assert found.memories[0].author == "memory"  # the context
        assert "I like to code in Python." in [m.content.parts[0].text for m in found.memories]
        assert any((m.id or "").startswith("slice:") for m in found.memories)
        assert texts("zzznomatch") == []


def test_many_memories_and_a_whole_user_are_forgotten_at_once(store_url: str) -> None:
    with MemoryService.open(store_url) as service:
        memory = PartnerMemoryService(memory=service)
        for session in _upstream_sessions():
            asyncio.run(memory.add_session_to_memory(session))
        handle = service.memory(namespace_of("test-app", "test-user"))
        forgotten = asyncio.run(
            memory.delete_memories(
                app_name="test-app",
                user_id="test-user",
                memory_ids=["event-1a", "event-2a", "no-such-id", "slice:no:such"],
            )
        )
        assert forgotten == 2
        assert [w.message.id for w in handle.window()] == ["event-1c"]
        asyncio.run(memory.forget_user(app_name="test-app", user_id="test-user"))
        assert handle.window() == []
        asyncio.run(memory.add_session_to_memory(_upstream_sessions()[0]))
        # the user's memory starts again; what was deleted one by one stays deleted
        assert [w.message.id for w in handle.window()] == ["event-1c"]
        other = service.memory(namespace_of("test-app", "another-user"))
        assert [w.message.id for w in other.window()] == ["event-3a"]
