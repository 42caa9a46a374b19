"""The Python client passes the same behaviour tests as the embedded handle: switching from
embedded to remote memory is one line."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from partner_memory import (
    AccessDeniedError,
    InvalidInputError,
    Message,
    NotFoundError,
    PartnerMemory,
    open_store,
)
from partner_memory.client import AsyncMemoryClient, MemoryClient
from partner_memory.context import Domain
from partner_memory.rolling import RollingResult
from tests.http_server import Server, make_key

NAMESPACE = "agent/one"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = Server(str(Path(tmp_path_factory.mktemp("client")) / "remote.db"))
    yield server
    server.stop()


@pytest.fixture(params=["embedded", "remote"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The same namespace API, in process or over HTTP (a fresh namespace each test)."""
    name = f"{NAMESPACE}-{request.node.name}"
    if request.param == "embedded":
        with PartnerMemory(open_store(tmp_path / "embedded.db"), name, owns_store=True) as handle:
            yield handle
        return
    server: Server = request.getfixturevalue("served")
    with MemoryClient(server.url, name) as client:
        yield client


def _talk(memory: Any) -> None:
    memory.record_turn("I adopted a cat named Luna", "Lovely! What colour is she?")
    memory.record_turn("Black with white paws", "Sounds adorable")
    memory.record_turn("We fly to Kyoto in April", "I will remember the trip")
    assert memory.roll_now()


def test_recall_keeps_to_a_role_a_speaker_and_metadata(memory: Any) -> None:
    memory.record_turn("Book the ferry", "Ferry booked for nine", source="USER: Mei")
    memory.record_turn("Is the ferry late?", "The ferry is on time", metadata={"channel": "sms"})
    assert memory.roll_now()

    def said(**where: Any) -> list[str]:
        return sorted(h.message.text for h in memory.recall("ferry", k=10, **where).hits)

    assert said(role="assistant") == ["Ferry booked for nine", "The ferry is on time"]
    assert said(speaker="mei") == ["Book the ferry"]
    assert said(role="user", metadata={"channel": "sms"}) == ["Is the ferry late?"]
    with pytest.raises(InvalidInputError, match="role"):
        memory.recall("ferry", role="robot")


def test_the_readme_example_finds_the_trip_on_a_fresh_namespace(memory: Any) -> None:
    """Nothing rolled yet; one question says "Kyoto", the other only means it."""
    memory.record_turn("I'm off to Kyoto in April.", "Book early!")
    for question in ("when is the Kyoto trip?", "where am I travelling?"):
        hits = memory.recall(question).hits
        assert "Kyoto" in hits[0].message.content, question


def test_recorded_turns_are_recalled_with_their_slices(memory: Any) -> None:
    turn = memory.record_turn("hello", "hi there")
    assert (turn.user.role, turn.assistant.role, turn.replied) == ("user", "assistant", True)
    _talk(memory)
    found = memory.recall("what is the cat called?", k=3)
    assert "Luna" in found.hits[0].message.content
    assert found.hits[0].unit_id is not None
    assert found.slices[0].slice.start_index <= found.hits[0].position
    assert memory.stats().rollings == 1


def test_messages_and_the_context(memory: Any) -> None:
    _talk(memory)
    memory.record_messages([Message("user", "No seafood for me", id="m-seafood")])
    assert "dialog_history" in {block.name for block in memory.context()}
    assert "<dialog_history" in memory.context_xml()
    found = memory.recall("seafood")
    assert found.hits[0].message.id == "m-seafood"
    assert found.hits[0].unit_id is None  # still in the window


def test_forgetting(memory: Any) -> None:
    _talk(memory)
    luna = memory.recall("Luna", k=1).hits[0]
    assert memory.forget_messages([luna.message.id]) == 1
    assert all("Luna" not in h.message.content for h in memory.recall("Luna").hits)
    memory.forget_unit(luna.unit_id)
    with pytest.raises(NotFoundError):
        memory.forget_unit(luna.unit_id)


def test_forgetting_everything_leaves_the_namespace_empty_and_in_use(memory: Any) -> None:
    _talk(memory)
    memory.record_turn("Still in the window", "yes")
    memory.forget_all()
    assert memory.window() == []
    assert memory.context_xml() == ""
    assert memory.recall("Luna").hits == []
    memory.forget_all()  # nothing left: nothing to do
    memory.record_turn("A new start", "welcome back")
    assert [w.message.text for w in memory.window()] == ["A new start", "welcome back"]


def test_rolling_recording_and_context_answer_alike(memory: Any) -> None:
    first = [Message("user", f"note {i} about the ferry", id=f"n{i}") for i in range(4)]
    assert memory.record_messages(first[:2]) == 2  # the window's length right after
    assert memory.record_messages(first[2:], interaction=1_700_000_000_000) == 4
    assert memory.window()[-1].interaction == 1_700_000_000_000
    rolled = memory.roll_now(through="n1")
    assert isinstance(rolled, RollingResult)
    assert [m.id for m in rolled.increment_messages] == ["n0", "n1"]
    assert (rolled.memory_slice.end_index, rolled.idle) == (2, False)
    assert rolled.summary == rolled.memory_slice.summary
    everything = memory.roll_now(idle=True)
    assert everything.idle
    assert everything.memory_slice.start_index == 2  # the rest, and the session ends
    assert memory.roll_now() is None  # nothing left to roll
    assert [b.name for b in memory.context(["MEMORY"])] == ["dialog_history"]
    assert memory.context([Domain.ACTION]) == []
    assert memory.context_xml(["ACTION"]) == ""
    found = memory.recall("ferry", activate=False)
    assert found.hits
    assert "activated_memory_slices" not in memory.context_xml()
    memory.recall("ferry")
    assert "activated_memory_slices" in memory.context_xml()


def test_the_same_errors(memory: Any) -> None:
    _talk(memory)
    with pytest.raises(InvalidInputError):
        memory.recall("cat", k=0)
    with pytest.raises(InvalidInputError):
        memory.recall("")
    with pytest.raises(NotFoundError):
        memory.forget_slice("no-such-unit", "no-such-slice")
    assert memory.topics() == []  # offline: no topics


def test_recall_that_activates_needs_a_key_that_may_write(tmp_path: Path) -> None:
    database = str(tmp_path / "keyed.db")
    _, writer = make_key(database, "*", "write")
    _, reader = make_key(database, "*", "read")
    server = Server(database)
    try:
        with MemoryClient(server.url, "ns", key=writer) as client:
            client.record_turn("I adopted a cat named Luna", "Lovely")
            assert client.recall("cat").hits
        with MemoryClient(server.url, "ns", key=reader) as client:
            assert client.recall("cat", activate=False).hits
            with pytest.raises(AccessDeniedError, match="403"):
                client.recall("cat")  # activating is a write
    finally:
        server.stop()


def test_the_async_client_and_a_refused_key(served: Server) -> None:
    async def talk() -> str:
        async with AsyncMemoryClient(served.url, "async-ns") as client:
            await client.record_turn("I adopted a cat named Luna", "Lovely")
            await client.record_turn("She is black", "Noted")
            assert await client.roll_now() is not None
            found = await client.recall("cat name")
            return found.hits[0].message.content

    assert "Luna" in asyncio.run(talk())
    wrong = MemoryClient(served.url, "async-ns", key="pm_000000000000_" + "x" * 43)
    with wrong, pytest.raises(AccessDeniedError, match="401"):
        wrong.stats()  # a key that is shown is checked, even on an open service


def test_a_slice_comes_with_where_each_summary_sentence_came_from(memory: Any) -> None:
    _talk(memory)
    unit = memory.recall("Kyoto", activate=False).slices[0]
    read = memory.read_slice(unit.unit_id[:8], unit.slice.id)  # prefixes, as on the CLI
    assert read.memory_slice == unit.slice
    assert [m.text for m in read.messages][:2] == [
        "I adopted a cat named Luna",
        "Lovely! What colour is she?",
    ]
    assert read.provenance
    assert all(s.supported and len(s.positions) == 1 for s in read.provenance)
    assert any("Kyoto" in s.text for s in read.provenance)
