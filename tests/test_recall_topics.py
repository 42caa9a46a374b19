"""Topics: with an LLM, each slice is filed under topic paths by a durable consumer; recall
keeps to a topic and below, falls back to its parent, names related topics; forgets take
topics with them; offline there are none."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from partner_memory import ConfigurationError, InvalidInputError, Message, PartnerMemory
from partner_memory.cli import app
from partner_memory.recall.embed import EmbeddingSettings
from partner_memory.recall.topics import TOPICS_CONSUMER, parse_paths
from partner_memory.rolling.llm import LLMSettings
from partner_memory.store import MemoryStore

TOPICS = {
    "Kyoto": "Topics:\n1. Travel -> Japan -> Kyoto\n2. food->japanese",
    "sourdough": "- food -> baking -> bread",
    "fence": "home->garden",
}


def _answer(body: dict[str, Any]) -> str:
    system, *rest = body["messages"]
    if "by topic" not in system["content"]:
        return "I noted what we talked about."  # a summary
    text = " ".join(m["content"] for m in rest)
    return next((paths for word, paths in TOPICS.items() if word in text), "misc->chat")


def _memory(store: MemoryStore, fake_llm: Any) -> PartnerMemory:
    fake_llm.respond = _answer
    return PartnerMemory(
        store,
        "agent",
        idle_timer=False,
        llm=LLMSettings(base_url=fake_llm.base_url, model="m", max_retries=0),
        embeddings=EmbeddingSettings("off"),
    )


def _talk(memory: PartnerMemory, *exchanges: tuple[str, str]) -> None:
    for said, answered in exchanges:
        memory.record_messages([Message("user", said), Message("assistant", answered)])
        memory.roll_now(idle=True)
    memory.wait()


def _three_topics(memory: PartnerMemory) -> None:
    _talk(
        memory,
        ("We fly to Kyoto in April, plans for temples", "I will find temple plans"),
        ("My sourdough starter died, plans for a new one", "Feed it twice a day"),
        ("I fixed the garden fence", "Well done"),
    )


def test_paths_are_read_from_what_the_llm_answers() -> None:
    assert parse_paths(TOPICS["Kyoto"]) == ["travel->japan->kyoto", "food->japanese"]
    assert parse_paths("Here you go:\n* A -> B\n* a->b\n* c->d\n* e->f\n* g->h") == [
        "a->b",
        "c->d",
        "e->f",
    ]
    assert parse_paths("no topic here") == []
    assert parse_paths("x->" + "y" * 41) == []


def test_slices_are_filed_and_recall_keeps_to_a_topic(store: MemoryStore, fake_llm: Any) -> None:
    with _memory(store, fake_llm) as memory:
        _three_topics(memory)
        listed = {t.path: t.slice_count for t in memory.topics()}
        assert listed == {
            "travel->japan->kyoto": 1,
            "food->japanese": 1,
            "food->baking->bread": 1,
            "home->garden": 1,
        }
        everywhere = memory.recall("plans", k=10)
        assert len({h.unit_id for h in everywhere.hits if "plans" in h.message.content}) >= 1
        assert any("sourdough" in h.message.content for h in everywhere.hits)
        travel = memory.recall("plans", topic="Travel", k=10)
        assert travel.hits
        assert all(
            "Kyoto" in h.message.content or "temple" in h.message.content for h in travel.hits
        )
        assert travel.topic is not None
        assert (travel.topic.path, travel.topic.slice_count) == ("travel", 1)
        food = memory.recall("plans", topic="food->baking", k=10)
        assert food.topic is not None
        assert food.topic.related == ["food->japanese"]
        assert food.hits[0].message.content.startswith("My sourdough")
        # nothing under the topic asked: its parent's slices, said so
        osaka = memory.recall("temples", topic="travel->japan->osaka")
        assert osaka.topic is not None
        assert osaka.topic.path == "travel->japan"
        assert {h.message.content for h in osaka.hits} == {
            "We fly to Kyoto in April, plans for temples",
            "I will find temple plans",
        }
        # words found nothing in the topic: its messages, oldest first
        garden = memory.recall("zebra", topic="home", k=5)
        assert [h.message.content for h in garden.hits] == ["I fixed the garden fence", "Well done"]
        assert all(h.score == 0 for h in garden.hits)
        with pytest.raises(InvalidInputError, match="topic"):
            memory.recall("plans", topic="->  ->")
        with pytest.raises(InvalidInputError, match="topic"):
            memory.recall("plans", topic="a->" + "b" * 41)


def test_forgetting_takes_topics_along(store: MemoryStore, fake_llm: Any) -> None:
    with _memory(store, fake_llm) as memory:
        _three_topics(memory)
        travel = memory.recall("Kyoto", topic="travel", k=1).hits[0]
        memory.forget_messages([travel.message.id])  # its slice is summarised again
        assert "travel->japan->kyoto" not in {t.path for t in memory.topics()}
        garden = memory.recall("fence", topic="home", k=1).hits[0]
        assert garden.unit_id is not None
        memory.forget_unit(garden.unit_id)
        assert {t.path for t in memory.topics()} == {"food->baking->bread"}


def test_a_failing_llm_delays_topics_and_they_catch_up(store: MemoryStore, fake_llm: Any) -> None:
    with _memory(store, fake_llm) as memory:
        fake_llm.respond = None  # every call fails: summaries fall back, topics wait
        fake_llm.default = ("status", 500)
        _talk(memory, ("We fly to Kyoto in April", "Lovely"))
        assert memory.topics() == []
        (status,) = [c for c in memory.stats().consumers if c.name == TOPICS_CONSUMER]
        assert status.failures >= 1
        fake_llm.respond = _answer
        memory.service.catch_up()
        assert [t.path for t in memory.topics()] == ["food->japanese", "travel->japan->kyoto"]


def test_offline_or_turned_off_there_are_no_topics(store: MemoryStore, fake_llm: Any) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        _talk(memory, ("We fly to Kyoto in April", "Lovely"))
        assert memory.topics() == []
        assert TOPICS_CONSUMER not in {c.name for c in memory.stats().consumers}
        found = memory.recall("Kyoto", topic="travel")
        assert found.hits == []
        assert found.topic is not None
        assert found.topic.slice_count == 0
    fake_llm.respond = _answer
    off = LLMSettings(base_url=fake_llm.base_url, model="m", topics=False)
    with PartnerMemory(store, "agent", idle_timer=False, llm=off) as memory:
        _talk(memory, ("My sourdough starter died", "Feed it"))
        assert memory.topics() == []
        assert TOPICS_CONSUMER not in {c.name for c in memory.stats().consumers}
    environ = {
        "PARTNER_MEMORY_LLM_BASE_URL": "http://127.0.0.1:9/v1",
        "PARTNER_MEMORY_LLM_MODEL": "m",
        "PARTNER_MEMORY_LLM_TOPICS": "OFF",
    }
    settings = LLMSettings.from_env(environ)
    assert settings is not None
    assert settings.topics is False
    with pytest.raises(ConfigurationError, match="PARTNER_MEMORY_LLM_TOPICS"):
        LLMSettings.from_env(environ | {"PARTNER_MEMORY_LLM_TOPICS": "maybe"})


def test_cli_topics_and_recall_by_topic(store: MemoryStore, store_url: str, fake_llm: Any) -> None:
    with _memory(store, fake_llm) as memory:
        _three_topics(memory)
    runner = CliRunner()
    listed = runner.invoke(app, ["topics", "--db", store_url, "-n", "agent", "--json"])
    assert listed.exit_code == 0, listed.output
    assert {t["path"] for t in json.loads(listed.output)["topics"]} >= {"home->garden"}
    found = runner.invoke(
        app, ["recall", "fence", "--db", store_url, "-n", "agent", "--topic", "home", "--json"]
    )
    assert found.exit_code == 0, found.output
    document = json.loads(found.output)
    assert document["topic"]["path"] == "home"
    assert document["hits"][0]["message"]["content"] == "I fixed the garden fence"
    table = runner.invoke(app, ["topics", "--db", store_url, "-n", "agent"])
    assert "food->baking->bread" in table.output
    bad = runner.invoke(app, ["topics", "--db", store_url, "-n", "agent", "--limit", "0"])
    assert bad.exit_code == 4
    assert "limit" in bad.output
