"""Traces and metrics through the SDK's in-memory readers: each operation's documented
spans, attributes and metrics, and no message text or query unless content capture is on."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.test.globals_test import reset_metrics_globals, reset_trace_globals

from partner_memory import LLMSettings, LogEntry, PartnerMemory
from partner_memory.rolling import RollingSettings
from partner_memory.service import MemoryService
from partner_memory.store.sqlite import SQLiteStore
from partner_memory.telemetry import names as n
from partner_memory.telemetry.instruments import CAPTURE_VARIABLE

SECRET = "my locker code is 4471-zebra"
QUESTION = "which locker code did I mention"


@dataclass
class Telemetry:
    spans: InMemorySpanExporter
    reader: InMemoryMetricReader

    def finished(self, name: str | None = None) -> list[ReadableSpan]:
        found = list(self.spans.get_finished_spans())
        return [s for s in found if name is None or s.name == name]

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for m in scope.metrics:
                    if m.name == metric:
                        found.extend(m.data.data_points)
        return found

    def total(self, metric: str, **labels: Any) -> float:
        """The sum (counters) or count (histograms) of the points with these labels."""
        total = 0.0
        for point in self.points(metric):
            if all(point.attributes.get(k) == v for k, v in labels.items()):
                total += getattr(point, "value", None) or getattr(point, "count", 0)
        return total

    def everything_said(self) -> str:
        """Every attribute and event of every span, as one text to search."""
        parts = []
        for s in self.finished():
            parts.append(s.name)
            parts.append(json.dumps(dict(s.attributes or {}), default=str))
            for event in s.events:
                parts.append(json.dumps(dict(event.attributes or {}), default=str))
        return "\n".join(parts)


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    """The SDK's providers, installed for this test only."""
    reset_trace_globals()
    reset_metrics_globals()
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    yield Telemetry(spans, reader)
    tracer_provider.shutdown()
    meter_provider.shutdown()
    reset_trace_globals()
    reset_metrics_globals()


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[PartnerMemory]:
    store = SQLiteStore(tmp_path / "memory.db")
    handle = PartnerMemory(store, "agent-7", idle_timer=False, owns_store=True)
    yield handle
    handle.close()


def _messages_of(memory: PartnerMemory) -> None:
    memory.record_turn(SECRET, "I will keep it safe.")
    memory.record_turn("the weather is fine", "good to hear")


def test_a_turn_is_an_update_memory_span_with_its_metrics(
    otel: Telemetry, memory: PartnerMemory
) -> None:
    memory.record_turn(SECRET, "I will keep it safe.")
    (span,) = otel.finished(n.UPDATE_MEMORY)
    attributes = dict(span.attributes or {})
    assert attributes[n.OPERATION] == n.UPDATE_MEMORY
    assert attributes[n.MEMORY_NAMESPACE] == "agent-7"
    assert attributes[n.MESSAGES] == 2
    assert attributes[n.WINDOW_LENGTH] == 2
    assert span.kind == trace.SpanKind.INTERNAL
    assert otel.total(n.MESSAGES_RECORDED) == 2
    assert otel.total(n.OPERATION_DURATION, **{n.OPERATION: n.UPDATE_MEMORY}) == 1
    # the write waited for SQLite's turn: measured
    assert otel.total(n.STORE_WAIT, **{n.DB_SYSTEM: "sqlite"}) >= 1


def test_a_rolling_in_the_background_is_a_child_of_the_turn_that_triggered_it(
    otel: Telemetry, tmp_path: Path
) -> None:
    store = SQLiteStore(tmp_path / "count.db")
    settings = RollingSettings(max_messages=4)
    with PartnerMemory(
        store, "agent", idle_timer=False, owns_store=True, settings=settings
    ) as memory:
        _messages_of(memory)  # the second turn fills the window: a rolling starts
        memory.wait()
    (rolling,) = otel.finished(n.ROLLING_SPAN)
    second_turn = otel.finished(n.UPDATE_MEMORY)[1]
    assert rolling.parent is not None
    assert rolling.parent.span_id == second_turn.context.span_id


def test_recall_is_a_search_memory_span_with_its_phases(
    otel: Telemetry, memory: PartnerMemory
) -> None:
    _messages_of(memory)
    memory.roll_now()
    found = memory.recall(QUESTION, k=3, role="user", since=0)
    (span,) = otel.finished(n.SEARCH_MEMORY)
    attributes = dict(span.attributes or {})
    assert attributes[n.TOP_K] == 3
    assert attributes[n.RESULT_COUNT] == len(found.hits) > 0
    assert list(attributes[n.FILTERS]) == ["role"]
    assert attributes[n.SINCE] == 0
    assert all(attributes[name] >= 0 for name in (n.INDEX_MS, n.ENGINE_MS, n.READ_MS))
    for phase in ("index", "engine", "read"):
        assert otel.total(n.RECALL_DURATION, **{n.PHASE: phase}) == 1
    assert otel.total(n.RECALL_HITS) == 1
    dated = memory.recall("what did we say yesterday", activate=False)
    (_, second) = otel.finished(n.SEARCH_MEMORY)
    if dated.date_range is not None:
        assert n.DATE_FROM in (second.attributes or {})


def test_no_text_or_query_in_telemetry_or_logs_by_default(
    otel: Telemetry, memory: PartnerMemory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    _messages_of(memory)
    result = memory.roll_now()
    assert result is not None
    memory.recall(QUESTION)
    memory.forget_messages([result.increment_messages[0].id])
    said = otel.everything_said()
    assert n.SEARCH_MEMORY in said
    assert n.ROLLING_SPAN in said
    for secret in ("4471", "zebra", "locker", "mention"):  # ...but not what was said
        assert secret not in said
        assert secret not in caplog.text


def test_content_capture_puts_text_and_query_in_spans(
    otel: Telemetry, memory: PartnerMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE_VARIABLE, "true")
    memory.record_turn(SECRET, "I will keep it safe.")
    memory.recall(QUESTION)
    said = otel.everything_said()
    assert SECRET in said
    assert QUESTION in said


def test_a_rolling_with_an_llm_is_traced_with_token_usage(
    otel: Telemetry, tmp_path: Path, fake_llm: Any
) -> None:
    llm = LLMSettings(base_url=fake_llm.base_url, model="small-model", max_retries=0, topics=False)
    store = SQLiteStore(tmp_path / "llm.db")
    with PartnerMemory(store, "agent", idle_timer=False, owns_store=True, llm=llm) as memory:
        _messages_of(memory)
        result = memory.roll_now()
    assert result is not None
    (rolling,) = otel.finished(n.ROLLING_SPAN)
    chats = otel.finished("chat small-model")
    assert chats, "the summary's LLM call is a GenAI client span"
    chat = chats[-1]
    assert chat.kind == trace.SpanKind.CLIENT
    assert chat.parent is not None
    assert chat.parent.span_id == rolling.context.span_id
    attributes = dict(chat.attributes or {})
    assert attributes[n.OPERATION] == n.CHAT
    assert attributes[n.PROVIDER] == "openai"
    assert attributes[n.REQUEST_MODEL] == "small-model"
    assert attributes[n.SERVER_ADDRESS] == "127.0.0.1"
    assert attributes[n.INPUT_TOKENS] > 0
    assert attributes[n.OUTPUT_TOKENS] > 0
    rolled = dict(rolling.attributes or {})
    assert rolled[n.SUMMARIZER] == "llm"
    assert rolled[n.MESSAGES] == 4
    assert rolled[n.SLICE_ID] == result.memory_slice.id
    assert otel.total(n.ROLLINGS_DONE, **{n.SUMMARIZER: "llm"}) == 1
    assert otel.total(n.ROLLED_MESSAGES) == 4
    assert otel.total(n.LLM_TOKENS, **{n.TOKEN_TYPE: "input"}) >= 1
    assert otel.total(n.LLM_DURATION, **{n.REQUEST_MODEL: "small-model"}) >= 1
    assert "I noted what we talked about" not in otel.everything_said()  # the answer: no


def test_a_summariser_fallback_is_an_event_a_count_and_a_log_event(
    otel: Telemetry, tmp_path: Path, fake_llm: Any, caplog: pytest.LogCaptureFixture
) -> None:
    fake_llm.default = ("status", 500)
    llm = LLMSettings(base_url=fake_llm.base_url, model="m", max_retries=0, topics=False)
    store = SQLiteStore(tmp_path / "down.db")
    with (
        caplog.at_level(logging.WARNING, logger="partner_memory"),
        PartnerMemory(store, "agent", idle_timer=False, owns_store=True, llm=llm) as memory,
    ):
        _messages_of(memory)
        memory.roll_now()
    (rolling,) = otel.finished(n.ROLLING_SPAN)
    assert (rolling.attributes or {})[n.SUMMARIZER] == "extractive"
    events = [e for e in rolling.events if e.name == n.FALLBACK_EVENT]
    assert [(e.attributes or {})[n.SUMMARIZER] for e in events] == ["summarize"]
    assert otel.total(n.ROLLING_FALLBACKS, **{n.SUMMARIZER: "summarize"}) == 1
    failed_chat = otel.finished("chat m")[-1]
    assert (failed_chat.attributes or {})[n.ERROR_TYPE] == "LLMError"
    assert otel.total(n.LLM_DURATION, **{n.ERROR_TYPE: "LLMError"}) == 1
    (record,) = [r for r in caplog.records if getattr(r, "event", None) == "fallback"]
    assert (record.namespace, record.failed) == ("agent", "summarize")  # type: ignore[attr-defined]


def test_a_summary_sentence_no_message_supports_is_counted(
    otel: Telemetry, tmp_path: Path, fake_llm: Any
) -> None:
    fake_llm.default = ("ok", "We talked about the weather. Mei owns a yacht called Seahorse.")
    llm = LLMSettings(base_url=fake_llm.base_url, model="m", max_retries=0, topics=False)
    store = SQLiteStore(tmp_path / "made-up.db")
    with PartnerMemory(store, "agent", idle_timer=False, owns_store=True, llm=llm) as memory:
        memory.record_turn("How is the weather?", "Sunny and warm today.")
        assert memory.roll_now() is not None
    assert otel.total(n.UNSUPPORTED_SENTENCES, **{n.SUMMARIZER: "llm"}) == 1


def test_forgets_are_delete_memory_spans_and_counted(
    otel: Telemetry, memory: PartnerMemory
) -> None:
    _messages_of(memory)
    result = memory.roll_now()
    assert result is not None
    memory.forget_messages([result.increment_messages[0].id])
    memory.forget_all()
    deleted = otel.finished(n.DELETE_MEMORY)
    assert [(s.attributes or {})[n.FORGET_TARGET] for s in deleted] == ["messages"]
    assert (deleted[0].attributes or {})[n.MESSAGES] == 1
    (store_deleted,) = otel.finished(n.DELETE_MEMORY_STORE)
    assert (store_deleted.attributes or {})[n.OPERATION] == n.DELETE_MEMORY_STORE
    assert otel.total(n.FORGETS, **{n.FORGET_TARGET: "messages"}) == 1
    assert otel.total(n.FORGETS, **{n.FORGET_TARGET: "namespace"}) == 1


class Counting:
    name = "counting"

    def __init__(self) -> None:
        self.seen: list[int] = []

    def apply(self, entry: LogEntry) -> Sequence[Any]:
        self.seen.append(entry.seq)
        return []


class Failing:
    name = "failing"

    def apply(self, entry: LogEntry) -> Sequence[Any]:
        raise RuntimeError(f"cannot apply rolling {entry.seq}: {SECRET}")


def _gauge(otel: Telemetry, metric: str, **labels: Any) -> float | None:
    values = [
        p.value
        for p in otel.points(metric)
        if all(p.attributes.get(k) == v for k, v in labels.items())
    ]
    return values[-1] if values else None


def test_consumers_catch_up_traced_and_their_lag_is_a_gauge(
    otel: Telemetry, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    service = MemoryService(
        SQLiteStore(tmp_path / "consumers.db"),
        owns_store=True,
        idle_timer=False,
        settings=RollingSettings(max_messages=4),
    )
    try:
        counting, failing = Counting(), Failing()
        service.register_consumer(counting).result()
        service.register_consumer(failing).result()
        memory = service.memory("agent")
        for turn in range(4):  # a rolling every second turn: two rollings
            memory.record_turn(f"question {turn}", f"answer {turn}")
            memory.wait()
        service.catch_up()
        assert counting.seen == [1, 2]
        follows = [
            s for s in otel.finished(n.CONSUMER_SPAN) if s.attributes[n.CONSUMER] == "counting"
        ]
        assert follows
        assert all(s.attributes[n.MEMORY_NAMESPACE] == "agent" for s in follows)
        assert otel.total(n.CONSUMER_APPLIED, **{n.CONSUMER: "counting"}) == 2
        assert otel.total(n.CONSUMER_FAILURES, **{n.CONSUMER: "failing"}) >= 1
        failures = [r for r in caplog.records if getattr(r, "event", None) == "consumer_failure"]
        assert failures
        assert SECRET not in caplog.text
        assert _gauge(otel, n.CONSUMER_LAG, **{n.CONSUMER: "failing"}) == 2
        assert _gauge(otel, n.CONSUMER_LAGGING, **{n.CONSUMER: "failing"}) == 1
        assert _gauge(otel, n.CONSUMER_LAG, **{n.CONSUMER: "counting"}) == 0
        assert _gauge(otel, n.WINDOW_MESSAGES) == len(memory.window())
        assert _gauge(otel, n.NAMESPACES) == 1
        assert _gauge(otel, n.LEASES, **{n.LEASE_STATE: "expired"}) == 0
        assert _gauge(otel, n.POOL_CONNECTIONS, **{n.CONNECTION_STATE: "idle"}) is not None
    finally:
        service.close()
    # a closed service's store is no longer reported
    assert not [p for p in otel.points(n.NAMESPACES) if "consumers.db" in p.attributes[n.STORE]]


def test_without_an_sdk_nothing_is_recorded_and_nothing_fails(tmp_path: Path) -> None:
    reset_trace_globals()
    reset_metrics_globals()
    store = SQLiteStore(tmp_path / "plain.db")
    with PartnerMemory(store, "agent", idle_timer=False, owns_store=True) as memory:
        _messages_of(memory)
        memory.roll_now()
        assert memory.recall(QUESTION).hits
    assert not trace.get_current_span().is_recording()


def test_every_backend_reports_its_gauges(otel: Telemetry, store: Any) -> None:
    """The health figures on SQLite, PostgreSQL and memory://; a pool's on the SQL ones."""
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        _messages_of(memory)
        assert _gauge(otel, n.WINDOW_MESSAGES, **{n.STORE: store.url}) == 4
        assert _gauge(otel, n.WINDOW_LONGEST, **{n.STORE: store.url}) == 4
        assert _gauge(otel, n.CONSUMER_LAG, **{n.STORE: store.url, n.CONSUMER: "recall"}) in (
            None,  # no rolling yet: the recall consumer never wrote a position
            0,
        )
        used = _gauge(otel, n.POOL_CONNECTIONS, **{n.STORE: store.url, n.CONNECTION_STATE: "used"})
        if hasattr(store, "connection_stats"):
            assert used is not None
            assert _gauge(otel, n.POOL_WAITING, **{n.STORE: store.url}) == 0
        else:
            assert used is None


def test_compression_calls_are_traced_inside_their_rolling(
    otel: Telemetry, tmp_path: Path, fake_llm: Any
) -> None:
    llm = LLMSettings(base_url=fake_llm.base_url, model="m", max_retries=0, topics=False)
    settings = RollingSettings(compress_threshold=200, compress_limit=100)
    store = SQLiteStore(tmp_path / "long.db")
    with PartnerMemory(
        store, "agent", idle_timer=False, owns_store=True, llm=llm, settings=settings
    ) as memory:
        memory.record_turn("a long story. " * 40, "and a long answer. " * 40)
        memory.roll_now()
    (rolling,) = otel.finished(n.ROLLING_SPAN)
    purposes = [
        (s.attributes or {})[n.LLM_PURPOSE]
        for s in otel.finished("chat m")
        if s.parent is not None and s.parent.span_id == rolling.context.span_id
    ]
    assert sorted(purposes) == ["compress", "compress", "summarize"]


def test_http_requests_are_server_spans_continuing_the_callers_trace(
    otel: Telemetry, tmp_path: Path
) -> None:
    from fastapi.testclient import TestClient

    from partner_memory.http.app import create_app

    service = MemoryService(SQLiteStore(tmp_path / "http.db"), owns_store=True, idle_timer=False)
    caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    traceparent = f"00-{caller_trace}-00f067aa0ba902b7-01"
    with TestClient(create_app(service, owns_service=True), base_url="http://127.0.0.1") as http:
        said = http.post(
            "/v1/namespaces/agent/turns",
            json={"user_input": SECRET, "assistant_output": "ok"},
            headers={"traceparent": traceparent, "X-Request-ID": "abc.123"},
        )
        assert said.status_code == 201
        assert said.headers["x-request-id"] == "abc.123"
        refused = http.post(
            "/v1/namespaces/agent/turns", content=b"{", headers={"X-Request-ID": "bad id!"}
        )
        assert refused.status_code == 422
        assert refused.headers["x-request-id"] != "bad id!"  # not a plain token: a new one
    servers = [s for s in otel.finished() if s.kind == trace.SpanKind.SERVER]
    assert len(servers) == 2  # one server span a request (FastAPI's own are off)
    first = servers[0]
    assert first.name == "POST /v1/namespaces/{namespace}/turns"
    assert format(first.context.trace_id, "032x") == caller_trace
    attributes = dict(first.attributes or {})
    assert attributes[n.HTTP_STATUS] == 201
    assert attributes[n.REQUEST_ID] == "abc.123"
    (update,) = otel.finished(n.UPDATE_MEMORY)
    assert update.parent is not None
    assert update.parent.span_id == first.context.span_id
    assert (servers[1].attributes or {})[n.HTTP_STATUS] == 422
    route = "/v1/namespaces/{namespace}/turns"
    assert otel.total(n.HTTP_DURATION, **{n.HTTP_ROUTE: route, n.HTTP_STATUS: 201}) == 1
    assert SECRET not in otel.everything_said()


def test_mcp_tool_calls_are_server_spans(otel: Telemetry, tmp_path: Path) -> None:
    import asyncio

    from partner_memory.mcp_tools import build_server, one_namespace

    service = MemoryService(SQLiteStore(tmp_path / "mcp.db"), owns_store=True, idle_timer=False)
    try:
        server = build_server(one_namespace(service, "agent"))
        turn = {"user_input": SECRET, "assistant_output": "ok"}
        asyncio.run(server.call_tool("remember_turn", turn))
    finally:
        service.close()
    (call,) = otel.finished("tools/call remember_turn")
    assert call.kind == trace.SpanKind.SERVER
    assert (call.attributes or {})[n.TOOL_NAME] == "remember_turn"
    assert (call.attributes or {})[n.MCP_METHOD] == "tools/call"
    (update,) = otel.finished(n.UPDATE_MEMORY)
    assert update.parent is not None
    assert update.parent.span_id == call.context.span_id


def test_an_error_on_a_span_names_its_type_and_quotes_nothing_unless_captured(
    otel: Telemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    from partner_memory.telemetry.instruments import span

    for capture in ("false", "true"):
        monkeypatch.setenv(CAPTURE_VARIABLE, capture)
        with pytest.raises(ValueError, match="zebra"), span(f"probe-{capture}", {}):
            raise ValueError(SECRET)  # an error quoting what it was given
    quiet, told = otel.finished("probe-false")[0], otel.finished("probe-true")[0]
    for probe in (quiet, told):
        assert (probe.attributes or {})[n.ERROR_TYPE] == "ValueError"
        assert probe.status.status_code == trace.StatusCode.ERROR
        assert [e.name for e in probe.events] == ["exception"]
    assert SECRET not in json.dumps([dict(e.attributes or {}) for e in quiet.events])
    assert (told.events[0].attributes or {})["exception.message"] == SECRET
