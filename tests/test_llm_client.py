"""The real OpenAI-compatible client against a local server: success and every failure mode."""

from __future__ import annotations

from typing import Any

import pytest

from partner_memory.errors import ConfigurationError
from partner_memory.memory import PartnerMemory
from partner_memory.rolling import (
    ChatClient,
    ExtractiveSummarizer,
    LLMError,
    LLMSettings,
    LLMSummarizer,
    SummarizerChain,
    UsageMeter,
)
from partner_memory.store.sqlite import SQLiteStore
from tests.conftest import ManualClock
from tests.helpers import messages


def client(server: Any, *, timeout: float = 5.0, retries: int = 0) -> ChatClient:
    return ChatClient(
        LLMSettings(
            base_url=server.base_url, model="test-model", timeout_s=timeout, max_retries=retries
        )
    )


def test_success_records_usage_and_latency(fake_llm: Any) -> None:
    meter = UsageMeter()
    answer = client(fake_llm).complete([{"role": "user", "content": "x" * 400}], meter=meter)
    assert answer.text == "I noted what we talked about."
    assert (meter.calls, meter.prompt_tokens) == (1, 100)
    assert meter.completion_tokens == len(answer.text) // 4
    assert meter.latency_ms > 0
    assert fake_llm.requests[0]["body"]["model"] == "test-model"
    assert fake_llm.requests[0]["path"] == "/v1/chat/completions"


def test_slow_answer_times_out(fake_llm: Any) -> None:
    fake_llm.script.append(("slow", 2.0))
    meter = UsageMeter()
    with pytest.raises(LLMError, match="Timeout"):
        client(fake_llm, timeout=0.3).complete([{"role": "user", "content": "x"}], meter=meter)
    assert meter.fallbacks
    assert "Timeout" in meter.fallbacks[0]


def test_server_error_is_retried_then_succeeds(fake_llm: Any) -> None:
    fake_llm.script.extend([("status", 500), ("ok", "second time lucky")])
    answer = client(fake_llm, retries=2).complete([{"role": "user", "content": "x"}])
    assert answer.text == "second time lucky"
    assert len(fake_llm.requests) == 2


def test_server_error_without_retries_fails(fake_llm: Any) -> None:
    fake_llm.script.append(("status", 500))
    with pytest.raises(LLMError, match="InternalServerError"):
        client(fake_llm).complete([{"role": "user", "content": "x"}])


def test_malformed_json_is_an_llm_error(fake_llm: Any) -> None:
    fake_llm.script.append(("malformed", None))
    with pytest.raises(LLMError):
        client(fake_llm).complete([{"role": "user", "content": "x"}])


def test_unstorable_answer_is_an_llm_error(fake_llm: Any) -> None:
    """An answer with NUL or a lone surrogate cannot be stored: the fallback takes over."""
    fake_llm.script.extend([("ok", "nul \x00 here"), ("ok", "half \udc00 pair")])
    for _ in range(2):
        with pytest.raises(LLMError, match="answer"):
            client(fake_llm).complete([{"role": "user", "content": "x"}])


def test_empty_content_is_an_llm_error(fake_llm: Any) -> None:
    fake_llm.script.append(("empty", None))
    with pytest.raises(LLMError, match="empty"):
        client(fake_llm).complete([{"role": "user", "content": "x"}])


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [
        (("status", 500), "InternalServerError"),
        (("malformed", None), "summarize"),
        (("empty", None), "empty"),
        (("ok", "a summary with a NUL \x00 inside"), "NUL"),
        (("ok", "a summary with a lone surrogate \ud800"), "not valid Unicode"),
        (("ok", "word " * 4_000_000), "characters (at most"),  # a 20 MB answer
    ],
)
def test_rolling_falls_back_to_offline_summary_and_records_why(
    fake_llm: Any,
    sqlite_store: SQLiteStore,
    manual_clock: ManualClock,
    behaviour: tuple[str, Any],
    reason: str,
) -> None:
    """A failed LLM call never loses a rolling: the extractive summary is stored, with the reason."""
    fake_llm.script.append(behaviour)
    settings = LLMSettings(base_url=fake_llm.base_url, model="m", max_retries=0)
    with PartnerMemory(
        sqlite_store, "agent", llm=settings, clock=manual_clock, idle_timer=False
    ) as memory:
        memory.record_messages(messages(4, "we planned the Kyoto trip"))
        result = memory.roll_now()
        assert result is not None
        assert result.memory_slice.summarizer == "extractive"
        assert len(result.summary) < 1000
        totals = memory.stats()
        assert totals.by_summarizer == {"extractive": 1}
        assert totals.llm_calls == 1
    (record,) = list(_rollings(sqlite_store))
    assert reason in record


def _rollings(store: SQLiteStore) -> list[str]:
    import sqlite3

    conn = sqlite3.connect(store.path)
    try:
        return [row[0] for row in conn.execute("SELECT fallbacks FROM rollings")]
    finally:
        conn.close()


def test_llm_summary_is_used_and_counted(
    fake_llm: Any, sqlite_store: SQLiteStore, manual_clock: ManualClock
) -> None:
    fake_llm.default = ("ok", "I helped Mei plan Kyoto.")
    settings = LLMSettings(base_url=fake_llm.base_url, model="m")
    with PartnerMemory(
        sqlite_store, "agent", llm=settings, clock=manual_clock, idle_timer=False
    ) as memory:
        memory.record_turn("Kyoto in April?", "Book early.", source="USER: Mei")
        result = memory.roll_now()
        assert result is not None
        assert (result.summary, result.memory_slice.summarizer) == (
            "I helped Mei plan Kyoto.",
            "llm",
        )
        assert memory.stats().prompt_tokens > 0


def test_settings_from_env() -> None:
    assert LLMSettings.from_env({}) is None
    with pytest.raises(ConfigurationError, match="MODEL"):
        LLMSettings.from_env({"PARTNER_MEMORY_LLM_BASE_URL": "http://x"})
    settings = LLMSettings.from_env(
        {
            "PARTNER_MEMORY_LLM_BASE_URL": "http://x/v1",
            "PARTNER_MEMORY_LLM_MODEL": "big",
            "PARTNER_MEMORY_LLM_COMPRESSOR_MODEL": "small",
            "PARTNER_MEMORY_LLM_TIMEOUT": "5",
        }
    )
    assert settings is not None
    assert (settings.model, settings.compressor_model, settings.timeout_s) == ("big", "small", 5.0)


def test_chain_order_is_llm_then_extractive(fake_llm: Any) -> None:
    chain = SummarizerChain([LLMSummarizer(client(fake_llm)), ExtractiveSummarizer()])
    assert chain.names == ["llm", "extractive"]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PARTNER_MEMORY_LLM_TIMEOUT", "-1"),
        ("PARTNER_MEMORY_LLM_TIMEOUT", "nan"),
        ("PARTNER_MEMORY_LLM_TIMEOUT", "soon"),
        ("PARTNER_MEMORY_LLM_MAX_RETRIES", "-1"),
        ("PARTNER_MEMORY_LLM_MAX_RETRIES", "2.5"),
    ],
)
def test_unusable_llm_numbers_are_configuration_errors(name: str, value: str) -> None:
    env = {"PARTNER_MEMORY_LLM_BASE_URL": "http://x/v1", "PARTNER_MEMORY_LLM_MODEL": "m"}
    with pytest.raises(ConfigurationError, match=name):
        LLMSettings.from_env({**env, name: value})


def test_a_trickling_endpoint_meets_the_call_deadline(fake_llm: Any) -> None:
    """One byte a second resets every read timeout; the call still ends at its deadline."""
    import time

    fake_llm.script.append(("trickle", 0.1))
    slow = client(fake_llm, timeout=0.5)
    started = time.monotonic()
    meter = UsageMeter()
    with pytest.raises(LLMError, match="deadline"):
        slow.complete([{"role": "user", "content": "x"}], meter=meter)
    assert time.monotonic() - started < slow.call_deadline_s + 5  # not the ~30 s of trickle
    assert "deadline" in meter.fallbacks[0]


def test_a_rolling_shares_one_llm_budget(fake_llm: Any) -> None:
    """Once a rolling's LLM budget is spent, further calls fall back without being made."""
    meter = UsageMeter(budget_s=0.0)
    with pytest.raises(LLMError, match="budget"):
        client(fake_llm).complete([{"role": "user", "content": "x"}], meter=meter)
    assert fake_llm.requests == []
