"""LangGraph's `BaseStore` contract on `PartnerMemoryStore`, through a compiled graph whose
nodes get the store injected (and a `ChatOpenAI` model on loopback), on every backend:
memories written in one run are found by recall in the next, after a restart, never in
another user's namespace; exact get/put/delete, filters, namespace listings and expiry
behave as LangGraph's own stores do; a forget in partner-memory deletes the items."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, TypedDict

import pytest

from partner_memory import InvalidInputError
from partner_memory.client import MemoryClient
from partner_memory.service import MemoryService
from tests.frameworks import Model, framework

framework("langgraph")
langchain_openai = framework("langchain_openai")

from langchain_core.runnables import RunnableConfig  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.store.base import BaseStore  # noqa: E402

from partner_memory.integrations.langgraph import (  # noqa: E402
    PartnerMemoryStore,
    labels_of,
    namespace_of,
)


class Turn(TypedDict):
    question: str
    answer: str


def _graph(fake_llm: Any, store: PartnerMemoryStore) -> Any:
    """One node: what the store recalls for the question goes to the model, and the
    question is remembered, in the namespace of the run's user."""
    model = langchain_openai.ChatOpenAI(
        model="local", base_url=fake_llm.base_url, api_key="local", max_retries=0
    )

    def answer(state: Turn, config: RunnableConfig, *, store: BaseStore) -> dict[str, str]:
        user = config["configurable"]["user_id"]
        found = store.search(("memories", user), query=state["question"], limit=3)
        known = "\n".join(item.value["text"] for item in found)
        said = model.invoke([("system", f"What you know:\n{known}"), ("human", state["question"])])
        store.put(("memories", user), f"turn-{time.time_ns()}", {"text": state["question"]})
        return {"answer": str(said.content)}

    builder = StateGraph(Turn)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    return builder.compile(store=store)


def _ask(graph: Any, user: str, question: str) -> str:
    config = {"configurable": {"user_id": user}}
    return str(graph.invoke({"question": question}, config)["answer"])


def test_a_graph_remembers_across_runs_and_restarts_and_users_stay_apart(
    store_url: str, fake_llm: Any, model: Model
) -> None:
    with MemoryService.open(store_url) as service:
        graph = _graph(fake_llm, PartnerMemoryStore(memory=service))
        assert _ask(graph, "user-7", "I'm off to Kyoto in April") == "answer 1"
        _ask(graph, "user-7", "When do I fly to Kyoto?")
        assert "off to Kyoto in April" in model.seen[-1]
        _ask(graph, "user-8", "When do I fly to Kyoto?")
        assert "off to Kyoto in April" not in model.seen[-1]

    with MemoryService.open(store_url) as service:  # a restart
        store = PartnerMemoryStore(memory=service)
        graph = _graph(fake_llm, store)
        _ask(graph, "user-7", "Remind me of my Kyoto plans")
        assert "off to Kyoto in April" in model.seen[-1]
        namespace = service.memory(namespace_of(("memories", "user-7")))
        assert namespace.roll_now(idle=True) is not None  # rolled into a unit: still found
        _ask(graph, "user-7", "Kyoto again?")
        assert "off to Kyoto in April" in model.seen[-1]
        trip = next(
            i for i in store.search(("memories", "user-7"), limit=50) if "April" in i.value["text"]
        )
        store.delete(("memories", "user-7"), trip.key)
        _ask(graph, "user-7", "Kyoto, once more?")
        assert "off to Kyoto in April" not in model.seen[-1]
        assert store.get(("memories", "user-7"), trip.key) is None


def test_items_are_exact_and_listed_as_langgraph_lists_them(backend_url: str) -> None:
    with MemoryService.open(backend_url) as service:
        store = PartnerMemoryStore(memory=service)
        store.put(("users", "7", "prefs"), "food", {"likes": "ramen", "spicy": 3})
        store.put(("users", "7", "prefs"), "Food", {"likes": "udon", "spicy": 1})
        store.put(("users", "7", "trips"), "kyoto", {"text": "Kyoto in April", "days": 5})
        store.put(("users", "8", "prefs"), "food", {"likes": "curry", "spicy": 5})
        store.put(("users", "a/b c", "x"), "odd", {"n": 1}, index=False)
        first = store.get(("users", "7", "prefs"), "food")
        assert first is not None
        assert (first.value, first.namespace) == (
            {"likes": "ramen", "spicy": 3},
            ("users", "7", "prefs"),
        )
        store.put(("users", "7", "prefs"), "food", {"likes": "soba", "spicy": 2})
        again = store.get(("users", "7", "prefs"), "food")
        assert again is not None
        assert again.value["likes"] == "soba"
        assert again.created_at == first.created_at
        assert again.updated_at >= first.updated_at

        assert [i.key for i in store.search(("users", "7"), filter={"spicy": {"$gte": 2}})] == [
            "food"
        ]
        assert {i.key for i in store.search(("users",), filter={"likes": "curry"})} == {"food"}
        assert [
            i.key for i in store.search(("users", "7"), filter={"spicy": {"$lt": 2, "$ne": 0}})
        ] == ["Food"]
        assert len(store.search(("users",), limit=2)) == 2
        assert len(store.search(("users",), limit=10, offset=3)) == 2
        found = store.search(("users", "7"), query="Kyoto trip in April")
        assert found[0].key == "kyoto"
        assert found[0].score is not None
        assert store.search(("users", "7"), query="Kyoto", filter={"days": {"$gt": 9}}) == []
        assert store.search(("users", "a/b c"), query="anything") == []  # nothing indexed
        assert store.get(("users", "a/b c", "x"), "odd") is not None

        assert store.list_namespaces() == [
            ("users", "7", "prefs"),
            ("users", "7", "trips"),
            ("users", "8", "prefs"),
            ("users", "a/b c", "x"),
        ]
        assert store.list_namespaces(prefix=("users", "7")) == [
            ("users", "7", "prefs"),
            ("users", "7", "trips"),
        ]
        assert store.list_namespaces(suffix=("prefs",)) == [
            ("users", "7", "prefs"),
            ("users", "8", "prefs"),
        ]
        assert store.list_namespaces(prefix=("users", "*", "prefs")) == [
            ("users", "7", "prefs"),
            ("users", "8", "prefs"),
        ]
        assert store.list_namespaces(max_depth=2) == [
            ("users", "7"),
            ("users", "8"),
            ("users", "a/b c"),
        ]
        assert store.list_namespaces(limit=1, offset=1) == [("users", "7", "trips")]

        store.delete(("users", "7", "prefs"), "food")
        store.delete(("users", "7", "prefs"), "never-there")
        assert store.get(("users", "7", "prefs"), "food") is None
        assert store.get(("users", "7", "prefs"), "Food") is not None


def test_a_filter_reads_past_the_first_page(backend_url: str) -> None:
    with MemoryService.open(backend_url) as service:
        store = PartnerMemoryStore(memory=service)
        rare = {5, 300, 420}
        for i in range(450):
            store.put(("many",), f"k{i:03}", {"rare": i in rare}, index=False)
        found = store.search(("many",), filter={"rare": True}, limit=10)
        assert sorted(i.key for i in found) == ["k005", "k300", "k420"]
        assert len(store.search(("many",), filter={"rare": True}, offset=1)) == 2
        assert len(store.search(("many",), filter={"rare": False}, limit=400)) == 400


def test_the_async_interface_and_a_batch(backend_url: str) -> None:
    from langgraph.store.base import GetOp, PutOp, SearchOp

    async def run(store: PartnerMemoryStore) -> None:
        await store.aput(("notes",), "n1", {"text": "Luna hates the vacuum cleaner"})
        got = await store.aget(("notes",), "n1")
        assert got is not None
        assert got.value["text"].startswith("Luna")
        assert [i.key for i in await store.asearch(("notes",), query="vacuum")] == ["n1"]
        assert await store.alist_namespaces() == [("notes",)]
        put, get, search = await store.abatch(
            [
                PutOp(("notes",), "n2", {"text": "Rex the dog"}),
                GetOp(("notes",), "n2"),
                SearchOp(("notes",), query="dog", limit=1),
            ]
        )
        assert put is None
        assert get is not None
        assert get.key == "n2"  # a put is seen by what follows it in the batch
        assert [i.key for i in search] == ["n2"]
        await store.adelete(("notes",), "n1")
        assert await store.aget(("notes",), "n1") is None

    with MemoryService.open(backend_url) as service:
        asyncio.run(run(PartnerMemoryStore(memory=service)))


def test_items_expire_and_the_sweep_deletes_them_and_their_messages(backend_url: str) -> None:
    with MemoryService.open(backend_url) as service:
        store = PartnerMemoryStore(memory=service, ttl={"default_ttl": 0.002})  # 120 ms
        store.put(("tmp",), "short", {"text": "a passing thought about Kyoto"})
        store.put(("tmp",), "kept", {"text": "a lasting thought about Kyoto"}, ttl=None)
        memory = service.memory(namespace_of(("tmp",)))
        deadline = time.monotonic() + 60
        while store.get(("tmp",), "short", refresh_ttl=False) is not None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert [i.key for i in store.search(("tmp",), query="Kyoto")] == ["kept"]
        assert len(memory.window()) == 2  # the expired item's message waits for the sweep
        assert store.sweep_ttl() == 1
        assert [w.message.content for w in memory.window()] == [
            '{"text": "a lasting thought about Kyoto"}'
        ]
        assert store.sweep_ttl() == 0
        sweeping = store.start_ttl_sweeper(sweep_interval_minutes=60)
        assert store.stop_ttl_sweeper(timeout=30)
        assert sweeping.done()


def test_a_forget_in_memory_deletes_the_items(backend_url: str) -> None:
    with MemoryService.open(backend_url) as service:
        store = PartnerMemoryStore(memory=service, fields=["text"])
        store.put(("memories", "mei"), "trip", {"text": "Kyoto in April", "secret": "x"})
        store.put(("memories", "mei"), "pet", {"text": "a cat called Luna"})
        memory = service.memory(namespace_of(("memories", "mei")))
        said = {w.message.content: w.message.id for w in memory.window()}
        assert set(said) == {"Kyoto in April", "a cat called Luna"}  # only the fields
        memory.forget_messages([said["Kyoto in April"]])
        assert store.get(("memories", "mei"), "trip") is None
        assert store.get(("memories", "mei"), "pet") is not None
        memory.forget_all()
        assert store.get(("memories", "mei"), "pet") is None
        assert store.list_namespaces() == []


def test_concurrent_puts_of_one_key_leave_one_item_found_once(store_url: str) -> None:
    with MemoryService.open(store_url) as service:
        store = PartnerMemoryStore(memory=service)

        def write(writer: int) -> None:
            for n in range(10):
                store.put(("shared",), "k", {"text": f"trip note {writer} {n}"})

        threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        held = store.get(("shared",), "k")
        assert held is not None
        found = store.search(("shared",), query="trip note", limit=50)
        assert [(i.key, i.value) for i in found] == [("k", held.value)]
        window = service.memory(namespace_of(("shared",))).window()
        assert [w.message.content for w in window] == [f'{{"text": "{held.value["text"]}"}}']


def test_bad_input_is_refused_and_stores_nothing(tmp_path: Any) -> None:
    with MemoryService.open(str(tmp_path / "memory.db")) as service:
        store = PartnerMemoryStore(memory=service)
        with pytest.raises(InvalidInputError, match="JSON"):
            store.put(("ns",), "k", {"when": {1, 2}})
        with pytest.raises(InvalidInputError, match="ttl"):
            store.put(("ns",), "k", {"a": 1}, ttl=-1)
        with pytest.raises(InvalidInputError, match=r"unknown operator '\$regex'"):
            store.search(("ns",), filter={"a": {"$regex": "x"}})
        with pytest.raises(ValueError, match="namespace"):
            store.put(("bad.label",), "k", {"a": 1})  # LangGraph's own check
        assert store.list_namespaces() == []
        with pytest.raises(InvalidInputError, match="fields"):
            PartnerMemoryStore(memory=service, fields="text")
        with (
            MemoryClient("http://127.0.0.1:9", "ns") as client,
            pytest.raises(InvalidInputError, match="pass a MemoryService"),
        ):
            PartnerMemoryStore(memory=client)  # type: ignore[arg-type]
    owned = PartnerMemoryStore(db=str(tmp_path / "own.db"))
    owned.put(("ns",), "k", {"a": 1})
    owned.close()


def test_namespaces_map_both_ways_without_collisions() -> None:
    odd = [("a",), ("a", "b"), ("a/b",), ("a b", "c%2F"), ("用户", "7")]
    names = [namespace_of(labels) for labels in odd]
    assert len(set(names)) == len(odd)
    assert [labels_of(n) for n in names] == odd
    assert namespace_of(("a", "b")).startswith(namespace_of(("a",)))
    assert not namespace_of(("ab",)).startswith(namespace_of(("a",)))


def test_a_query_with_a_filter_returns_every_item_the_filter_keeps(backend_url: str) -> None:
    """Mirrors langchain-ai/langgraph libs/checkpoint-sqlite/tests/test_store.py
    test_vector_search_with_filters (only the store differs): with a query, every
    indexed item passing the filter comes back, recall's best first, up to `limit`."""
    with MemoryService.open(backend_url) as service:
        store = PartnerMemoryStore(memory=service)
        docs = [
            ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
            ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
            ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
            ("doc4", {"text": "blue car", "color": "blue", "score": 3.5}),
        ]
        for key, value in docs:
            store.put(("test",), key, value)

        found = store.search(("test",), query="apple", filter={"color": "red"})
        assert [r.key for r in found] == ["doc1", "doc2"]
        found = store.search(("test",), query="car", filter={"color": "red"})
        assert found[0].key == "doc2"
        found = store.search(("test",), query="blue", filter={"score": {"$gt": 3.2}})
        assert len(found) == 3
        assert found[0].key == "doc4"
        assert {r.key for r in found} == {"doc1", "doc3", "doc4"}
        assert found[0].score is not None
        found = store.search(
            ("test",), query="apple", filter={"score": {"$gte": 4.0}, "color": "green"}
        )
        assert [r.key for r in found] == ["doc3"]
        every = store.search(("test",), query="blue", filter={"score": {"$gt": 3.2}})
        paged = store.search(("test",), query="blue", filter={"score": {"$gt": 3.2}}, offset=1)
        assert [r.key for r in paged] == [r.key for r in every[1:]]
        assert (
            len(store.search(("test",), query="blue", filter={"score": {"$gt": 0}}, limit=2)) == 2
        )
        store.put(("test",), "doc5", {"text": "blue hat", "score": 9.0}, index=False)
        found = store.search(("test",), query="hat", filter={"score": {"$gt": 8}})
        assert found == []  # an item put without an index is not searched by a query
        for i in range(12):  # recall's few candidates are all apples, none kept
            store.put(("fruit",), f"apple{i}", {"text": f"apple number {i}", "score": 1})
        store.put(("fruit",), "pear", {"text": "a pear", "score": 9.5})
        found = store.search(("fruit",), query="apple", filter={"score": {"$gt": 8}}, limit=1)
        assert [(r.key, r.score) for r in found] == [("pear", 0.0)]  # kept, after recall's
        everything = store.search(("fruit",), query="apple", limit=20)
        assert len(everything) == 13  # every indexed item, ranked: the pear last
        assert everything[-1].key == "pear"
        store.put(("docs",), "nested", {"user": {"access-level": "x"}, "a.b": 1})
        assert [r.key for r in store.search(("docs",), filter={"user.access-level": "x"})] == [
            "nested"
        ]
        assert [r.key for r in store.search(("docs",), filter={"a.b": 1})] == ["nested"]
