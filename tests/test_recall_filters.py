"""Recall kept to a role, speaker, unit or metadata, on every backend: exact (a filter is
part of the query, not a check of the best hits), the same for stored and window
messages and after the index is rebuilt from the store, through every interface."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from partner_memory import InvalidInputError, Message, PartnerMemory
from partner_memory.cli import app
from partner_memory.recall.filters import MAX_METADATA_KEYS, RecallFilter
from partner_memory.store import MemoryStore, open_store
from tests.http_server import Server

START = 1_700_000_000_000
STORED = [
    ("user", "I booked the ferry to Naoshima", {"speaker": "Mei", "channel": "slack", "n": 2}),
    ("assistant", "The ferry leaves at nine", {"channel": "slack"}),
    ("user", "Is the ferry refundable?", {"speaker": "Ken", "n": 2.0, "tags": ["a", "b"]}),
    ("user", "The ferry tickets are in my inbox", {"speaker": "Mei", "n": True}),
]
WINDOW = [
    ("user", "Ferry cancelled, a storm is coming", {"speaker": "Ken", "channel": "slack"}),
    ("assistant", "Sorry the ferry was cancelled", {}),
]


def _messages(rows: list[tuple[str, str, dict[str, Any]]], first: int) -> list[Message]:
    return [
        Message(role, text, timestamp=START + (first + i) * 1000, metadata=metadata)  # type: ignore[arg-type]
        for i, (role, text, metadata) in enumerate(rows)
    ]


def _chat(memory: PartnerMemory) -> str:
    memory.record_messages(_messages(STORED, 0), interaction=START + 3000)
    rolled = memory.roll_now(idle=True)  # all of them
    assert rolled is not None
    assert rolled.memory_slice.end_index == len(STORED)
    memory.record_messages(_messages(WINDOW, 10), interaction=START + 11_000)
    memory.wait()
    return rolled.memory_unit.id


def _said(memory: Any, **where: Any) -> set[str]:
    return {h.message.text for h in memory.recall("ferry", k=20, **where).hits}


CASES: list[tuple[dict[str, Any], set[str]]] = [
    ({}, {t for _, t, _ in STORED + WINDOW}),
    ({"role": "user"}, {STORED[0][1], STORED[2][1], STORED[3][1], WINDOW[0][1]}),
    ({"role": "assistant"}, {STORED[1][1], WINDOW[1][1]}),
    ({"speaker": "mei"}, {STORED[0][1], STORED[3][1]}),
    ({"speaker": "KEN"}, {STORED[2][1], WINDOW[0][1]}),
    ({"speaker": "Nobody"}, set()),
    ({"metadata": {"channel": "slack"}}, {STORED[0][1], STORED[1][1], WINDOW[0][1]}),
    ({"metadata": {"n": 2}}, {STORED[0][1], STORED[2][1]}),  # 2 == 2.0, but not true
    ({"metadata": {"n": True}}, {STORED[3][1]}),
    ({"metadata": {"tags": ["a", "b"]}}, {STORED[2][1]}),
    ({"metadata": {"tags": ["b", "a"]}}, set()),
    ({"role": "user", "metadata": {"channel": "slack"}}, {STORED[0][1], WINDOW[0][1]}),
]


@pytest.mark.parametrize(("where", "expected"), CASES, ids=[str(w) for w, _ in CASES])
def test_recall_keeps_to_the_filter_in_the_index_and_the_window(
    store: MemoryStore, where: dict[str, Any], expected: set[str]
) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        _chat(memory)
        assert _said(memory, **where) == expected
        memory.service.recall.replicas.drop("agent")  # rebuilt from the store's rows
        assert _said(memory, **where) == expected


def test_a_unit_filter_keeps_to_that_unit_and_leaves_out_the_window(store: MemoryStore) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        unit = _chat(memory)
        assert _said(memory, unit=unit) == {t for _, t, _ in STORED}
        assert _said(memory, unit="no-such-unit") == set()
        dated = memory.recall("ferry", k=20, unit=unit, since=START + 2000, until=START + 4000)
        assert {h.message.text for h in dated.hits} == {STORED[2][1], STORED[3][1]}


def test_a_filter_is_exact_however_many_messages_outrank_what_it_keeps(
    store: MemoryStore,
) -> None:
    """One user message among many assistant messages that match the words better."""
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        loud = [
            Message("assistant", f"ferry ferry ferry timetable {i}", timestamp=START + i)
            for i in range(150)
        ]
        quiet = Message("user", "somewhere a ferry?", timestamp=START + 500)
        memory.record_messages([*loud[:100], quiet], interaction=START + 500)
        memory.roll_now(idle=True)
        memory.record_messages(loud[100:], interaction=START + 600)
        memory.wait()
        (hit,) = memory.recall("ferry", k=1, role="user").hits
        assert hit.message.id == quiet.id


def test_a_filter_applies_to_a_time_asked_for_alone(store: MemoryStore) -> None:
    """A question asking only for a time fills with its messages: only those admitted."""
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        _chat(memory)
        found = memory.recall("what happened in November 2023?", k=20, role="assistant")
        assert found.date_range is not None
        assert {h.message.text for h in found.hits} == {STORED[1][1], WINDOW[1][1]}


@pytest.mark.parametrize(
    ("where", "problem"),
    [
        ({"role": "robot"}, "role must be one of assistant, system, user"),
        ({"speaker": " "}, "speaker must not be empty"),
        ({"unit": ""}, "unit must not be empty"),
        ({"speaker": 3}, "speaker must be a string"),
        ({"metadata": ["channel"]}, "metadata must be an object"),
        ({"metadata": {"n": float("nan")}}, "metadata value of 'n' is not a JSON value"),
        ({"metadata": {"n": object()}}, "metadata value of 'n' is not a JSON value"),
        ({"metadata": {"": 1}}, "metadata keys must be non-empty strings"),
        ({"metadata": {str(i): i for i in range(MAX_METADATA_KEYS + 1)}}, "at most 20 keys"),
    ],
)
def test_a_bad_filter_is_refused_naming_what_is_wrong(
    tmp_path: Path, where: dict[str, Any], problem: str
) -> None:
    with PartnerMemory(open_store(tmp_path / "m.db"), "agent", owns_store=True) as memory:
        memory.record_messages(_messages(STORED, 0))
        with pytest.raises(InvalidInputError, match=problem):
            memory.recall("ferry", **where)
        assert len(memory.window()) == len(STORED)


def test_an_empty_filter_is_no_filter() -> None:
    assert RecallFilter().empty
    assert not RecallFilter(metadata={"a": 1}).empty
    assert RecallFilter(metadata={"a": 1.0}).tags == RecallFilter(metadata={"a": 1}).tags
    assert RecallFilter(metadata={"a": True}).tags != RecallFilter(metadata={"a": 1}).tags


def test_the_cli_keeps_to_role_speaker_unit_and_metadata(tmp_path: Path) -> None:
    database = str(tmp_path / "cli.db")
    with PartnerMemory(open_store(database), "agent", idle_timer=False, owns_store=True) as memory:
        unit = _chat(memory)
    runner = CliRunner()

    def texts(*flags: str, code: int = 0) -> set[str]:
        result = runner.invoke(app, ["recall", "ferry", "--db", database, "-n", "agent", *flags])
        assert result.exit_code == code, result.output
        if code:
            return {result.output}
        return {h["message"]["text"] for h in json.loads(result.output)["hits"]}

    assert texts("--role", "assistant", "--json") == {STORED[1][1], WINDOW[1][1]}
    assert texts("--speaker", "Mei", "--json") == {STORED[0][1], STORED[3][1]}
    assert texts("--metadata", "n=2", "--metadata", "channel=slack", "--json") == {STORED[0][1]}
    assert texts("--metadata", 'tags=["a","b"]', "--unit", unit, "--json") == {STORED[2][1]}
    (refused,) = texts("--metadata", "channel", code=4)
    assert "--metadata takes KEY=VALUE, got 'channel'" in refused
    (refused,) = texts("--role", "robot", code=4)
    assert "role must be one of" in refused


def test_http_keeps_to_the_filter_and_refuses_a_bad_one_with_422(tmp_path: Path) -> None:
    database = str(tmp_path / "served.db")
    with PartnerMemory(open_store(database), "agent", idle_timer=False, owns_store=True) as memory:
        _chat(memory)
    server = Server(database)
    try:
        with server.client() as client:
            url = "/v1/namespaces/agent/recall"
            body = {"query": "ferry", "k": 20, "role": "user", "metadata": {"channel": "slack"}}
            found = client.post(url, json=body)
            assert found.status_code == 200, found.text
            assert {h["message"]["text"] for h in found.json()["hits"]} == {
                STORED[0][1],
                WINDOW[0][1],
            }
            for bad, where in [
                ({"role": "robot"}, "body.role"),
                ({"speaker": ""}, "body.speaker"),
                ({"metadata": {str(i): i for i in range(MAX_METADATA_KEYS + 1)}}, "body.metadata"),
                ({"metadata": ["channel"]}, "body.metadata"),
            ]:
                refused = client.post(url, json={"query": "ferry", **bad})
                assert refused.status_code == 422, (bad, refused.text)
                fields = [f["field"] for f in refused.json()["error"]["fields"]]
                assert where in fields, (bad, fields)
    finally:
        server.stop()
