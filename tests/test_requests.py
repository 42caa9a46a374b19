"""The values that cross the layers: a recall's question, a turn, a forget.

Each has one wire form (`to_dict`/`from_dict`) and refuses bad input when it
is built, whichever door built it; the interfaces that publish a schema (HTTP,
MCP) declare the filter's fields from `RecallFilter` itself.
"""

from __future__ import annotations

import asyncio
from dataclasses import fields

import pytest
from fastapi.testclient import TestClient

from partner_memory.errors import InvalidInputError
from partner_memory.http.app import create_app
from partner_memory.mcp_tools import build_server, one_namespace
from partner_memory.recall.filters import RecallFilter
from partner_memory.recall.query import RecallQuery
from partner_memory.requests import ForgetRequest, TurnInput
from partner_memory.service import MemoryService


def test_a_recall_query_round_trips_through_its_wire_form() -> None:
    asked = RecallQuery(
        "where did we go?",
        k=5,
        since=1,
        until=2,
        dates=False,
        topic="travel",
        where=RecallFilter(role="user", speaker="Ann", unit="u1", metadata={"a": [1, 2]}),
        activate=False,
    )
    assert RecallQuery.from_dict(asked.to_dict()) == asked
    assert RecallQuery.of(asked) is asked
    assert RecallQuery.of(asked, k=7, role="assistant").where.role == "assistant"
    assert RecallQuery.of(asked, k=7).where == asked.where


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"query": "x", "colour": "red"}, "colour"),
        ({"k": 3}, "query"),
        ({"query": "  "}, "query"),
        ({"query": "x", "k": 0}, "k"),
        ({"query": "x", "k": True}, "k"),
        ({"query": "x", "role": "robot"}, "role"),
        ({"query": "x", "since": -5}, "since"),
        ({"query": "x", "dates": "yes"}, "dates"),
        ({"query": "x", "metadata": {"k": float("nan")}}, "metadata"),
    ],
)
def test_a_bad_recall_query_is_refused_by_name(given: dict[str, object], named: str) -> None:
    with pytest.raises(InvalidInputError, match=named):
        RecallQuery.from_dict(given)


def test_every_filter_field_is_in_the_http_and_mcp_schemas() -> None:
    """A filter added to `RecallFilter` reaches HTTP's body and MCP's tool unedited."""
    names = {f.name for f in fields(RecallFilter)}
    service = MemoryService.open("memory://")
    try:
        with TestClient(create_app(service), base_url="http://127.0.0.1") as http:
            openapi = http.get("/openapi.json").json()
        body = openapi["components"]["schemas"]["RecallIn"]["properties"]
        assert names <= set(body)
        tools = asyncio.run(build_server(one_namespace(service, "n")).list_tools())
        recall = next(t for t in tools if t.name == "recall")
        assert names <= set(recall.input_schema["properties"])
        assert recall.input_schema["properties"]["role"]["anyOf"][0]["enum"] == [
            "user",
            "assistant",
            "system",
        ]
    finally:
        service.close()


def test_a_turn_input_round_trips_and_refuses_a_two_line_source() -> None:
    turn = TurnInput("hi", "hello", "Ann", 5, {"a": 1})
    assert TurnInput.from_dict(turn.to_dict()) == turn
    assert TurnInput.from_dict({"user_input": "a", "assistant_output": "b"}).source == "USER"
    with pytest.raises(InvalidInputError, match="one line"):
        TurnInput("hi", "hello", "A\nB")
    with pytest.raises(InvalidInputError, match="assistant_output"):
        TurnInput.from_dict({"user_input": "a"})
    with pytest.raises(InvalidInputError, match="unknown"):
        TurnInput.from_dict({"user_input": "a", "assistant_output": "b", "mood": "x"})


def test_a_forget_request_names_what_it_needs() -> None:
    for request in (
        ForgetRequest.messages(["m1", "m2"]),
        ForgetRequest.slice("u", "s"),
        ForgetRequest.unit("u"),
        ForgetRequest("namespace"),
    ):
        assert ForgetRequest.from_dict(request.to_dict()) == request
    with pytest.raises(InvalidInputError, match="not one string"):
        ForgetRequest.messages("m1")
    with pytest.raises(InvalidInputError, match="no message"):
        ForgetRequest.messages([])
    with pytest.raises(InvalidInputError, match="slice_id"):
        ForgetRequest("slice", unit_id="u")
    with pytest.raises(InvalidInputError, match="target"):
        ForgetRequest.from_dict({"target": "everything"})


def test_a_handle_forgets_through_one_request(tmp_path: object) -> None:
    service = MemoryService.open("memory://")
    try:
        memory = service.memory("n")
        turn = memory.record_turn("I like tea", "noted")
        assert memory.forget(ForgetRequest.messages([turn.user.id])) == 1
        assert [m.message.id for m in memory.window()] == [turn.assistant.id]
        memory.forget(ForgetRequest("namespace"))
        assert memory.window() == []
        memory.record(TurnInput("again", "yes"))
        assert len(memory.window()) == 2
    finally:
        service.close()
