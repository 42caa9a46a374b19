"""An OpenAI-compatible chat-completions client, and the meter that counts what it costs.

The official SDK does the HTTP, timeouts and bounded retries with backoff;
this module turns every way a call can fail (timeout, 5xx after retries,
malformed JSON, an empty, oversized or unstorable answer) into one
`LLMError`, so callers fall back instead of crashing, and records tokens and
latency of each call. The SDK's timeout bounds each read, so an endpoint
that trickles bytes could hold a call for ever: a watchdog closes the call's
connection at its deadline, and a rolling's calls share a time budget.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.trace import SpanKind

from partner_memory.errors import ConfigurationError, InvalidInputError, LLMError
from partner_memory.model import check_text
from partner_memory.telemetry import names as n
from partner_memory.telemetry.instruments import capturing_content, instruments, measured, span

__all__ = ["ChatClient", "Completion", "LLMError", "LLMSettings", "UsageMeter"]

#: The longest answer used; a longer one is as unusable as none.
MAX_ANSWER_CHARS = 100_000


@dataclass(frozen=True, slots=True)
class LLMSettings:
    """Where the LLM lives. Read from PARTNER_MEMORY_LLM_* only when asked."""

    base_url: str
    model: str
    api_key: str = field(default="not-needed", repr=False)  # never printed
    compressor_model: str | None = None
    timeout_s: float = 60.0
    max_retries: int = 2
    #: File slices under topic paths (one more call per rolling; `recall.topics`).
    topics: bool = True

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LLMSettings | None:
        """The configured LLM, or None when no base URL is set (the offline default)."""
        env = os.environ if environ is None else environ
        base_url = env.get("PARTNER_MEMORY_LLM_BASE_URL", "").strip()
        if not base_url:
            return None
        model = env.get("PARTNER_MEMORY_LLM_MODEL", "").strip()
        if not model:
            raise ConfigurationError(
                "PARTNER_MEMORY_LLM_BASE_URL is set but PARTNER_MEMORY_LLM_MODEL is not"
            )
        raw_timeout = env.get("PARTNER_MEMORY_LLM_TIMEOUT", "60")
        raw_retries = env.get("PARTNER_MEMORY_LLM_MAX_RETRIES", "2")
        try:
            timeout = float(raw_timeout)
        except ValueError:
            timeout = math.nan
        if not (math.isfinite(timeout) and timeout > 0):
            raise ConfigurationError(
                f"PARTNER_MEMORY_LLM_TIMEOUT must be a number of seconds > 0, got {raw_timeout!r}"
            )
        if not raw_retries.strip().isdigit():
            raise ConfigurationError(
                f"PARTNER_MEMORY_LLM_MAX_RETRIES must be a whole number >= 0, got {raw_retries!r}"
            )
        retries = int(raw_retries)
        raw_topics = env.get("PARTNER_MEMORY_LLM_TOPICS", "on").strip().lower()
        if raw_topics not in ("on", "off", "true", "false", "1", "0", "yes", "no"):
            raise ConfigurationError(
                f"PARTNER_MEMORY_LLM_TOPICS must be on or off, got {raw_topics!r}"
            )
        return cls(
            base_url=base_url,
            model=model,
            api_key=env.get("PARTNER_MEMORY_LLM_API_KEY", "").strip() or "not-needed",
            compressor_model=env.get("PARTNER_MEMORY_LLM_COMPRESSOR_MODEL", "").strip() or None,
            timeout_s=timeout,
            max_retries=retries,
            topics=raw_topics in ("on", "true", "1", "yes"),
        )


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    #: The model that answered, as the endpoint names it ("" when it does not say).
    model: str = ""


class UsageMeter:
    """Adds up the LLM calls of one rolling; shared by the threads that compress in parallel.

    `budget_s` bounds the time all of the rolling's calls may take together.
    """

    def __init__(self, budget_s: float | None = None) -> None:
        self.deadline = None if budget_s is None else time.monotonic() + budget_s
        self._lock = threading.Lock()
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.latency_ms = 0.0
        self.fallbacks: list[str] = []

    def add(self, completion: Completion) -> None:
        with self._lock:
            self.calls += 1
            self.prompt_tokens += completion.prompt_tokens
            self.completion_tokens += completion.completion_tokens
            self.latency_ms += completion.latency_ms

    def failed(self, what: str, error: Exception, latency_ms: float) -> None:
        with self._lock:
            self.calls += 1
            self.latency_ms += latency_ms
            self.fallbacks.append(f"{what}: {error}")


class ChatClient:
    """Chat completions against any OpenAI-compatible endpoint."""

    def __init__(self, settings: LLMSettings) -> None:
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - a core dependency
            raise ConfigurationError("the openai package is required for LLM calls") from exc
        self._openai = openai
        self.settings = settings

    @property
    def call_deadline_s(self) -> float:
        """The longest one call may take: its attempts, their backoff, and a second of grace
        so that an attempt's own timeout, when it fires, is the error reported."""
        s = self.settings
        return s.timeout_s * (s.max_retries + 1) + 2.0 * s.max_retries + 1.0

    def _connect(self) -> Any:
        # one SDK client per call: the watchdog can close its connection without
        # touching any other call in flight
        return self._openai.OpenAI(
            base_url=self.settings.base_url,
            api_key=self.settings.api_key,
            timeout=self.settings.timeout_s,
            max_retries=self.settings.max_retries,
        )

    def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        model: str | None = None,
        meter: UsageMeter | None = None,
        what: str = "llm",
        max_tokens: int | None = None,
        max_chars: int = MAX_ANSWER_CHARS,
    ) -> Completion:
        """One chat completion; raises LLMError (and records it on `meter`) on any failure.

        Traced as a GenAI client span (`chat {model}`) with its token usage; the
        messages and the answer only when content capture is on."""
        model = model or self.settings.model
        labels = {n.OPERATION: n.CHAT, n.PROVIDER: "openai", n.REQUEST_MODEL: model}
        where = urlsplit(self.settings.base_url)
        attributes: dict[str, str | int] = {
            **labels,
            n.SERVER_ADDRESS: where.hostname or "",
            n.LLM_PURPOSE: what,
        }
        if where.port:
            attributes[n.SERVER_PORT] = where.port
        parts = instruments()
        with (
            measured(parts.llm_duration, labels),
            span(f"chat {model}", attributes, kind=SpanKind.CLIENT) as current,
        ):
            capturing = current.is_recording() and capturing_content()
            if capturing:
                current.set_attribute(n.INPUT_MESSAGES, json.dumps([dict(m) for m in messages]))
            completion = self._complete(
                messages,
                model=model,
                meter=meter,
                what=what,
                max_tokens=max_tokens,
                max_chars=max_chars,
            )
            current.set_attributes(
                {
                    n.INPUT_TOKENS: completion.prompt_tokens,
                    n.OUTPUT_TOKENS: completion.completion_tokens,
                }
            )
            if completion.model:
                current.set_attribute(n.RESPONSE_MODEL, completion.model)
            if capturing:
                answer = [{"role": "assistant", "content": completion.text}]
                current.set_attribute(n.OUTPUT_MESSAGES, json.dumps(answer))
        parts.llm_tokens.record(completion.prompt_tokens, {**labels, n.TOKEN_TYPE: "input"})
        parts.llm_tokens.record(completion.completion_tokens, {**labels, n.TOKEN_TYPE: "output"})
        return completion

    def _complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        model: str,
        meter: UsageMeter | None,
        what: str,
        max_tokens: int | None,
        max_chars: int,
    ) -> Completion:
        started = time.perf_counter()
        deadline = self.call_deadline_s
        if meter is not None and meter.deadline is not None:
            deadline = min(deadline, meter.deadline - time.monotonic())
        expired = threading.Event()
        client = self._connect()

        def give_up() -> None:
            expired.set()
            client.close()

        watchdog = threading.Timer(max(deadline, 0.0), give_up)
        watchdog.daemon = True
        try:
            if deadline <= 0:
                raise LLMError("the rolling's LLM time budget is spent")
            watchdog.start()
            response = client.chat.completions.create(
                model=model,
                messages=[dict(m) for m in messages],
                max_tokens=max_tokens,
            )
            choices = response.choices
            text = (choices[0].message.content or "") if choices else ""
            if not text.strip():
                raise LLMError("the model returned an empty answer")
            if len(text) > max_chars:
                raise LLMError(
                    f"the model's answer has {len(text):,} characters (at most {max_chars:,})"
                )
            _check_answer(text)
        except Exception as exc:
            latency = (time.perf_counter() - started) * 1000
            if expired.is_set():
                error = LLMError(f"no answer within the call's deadline of {deadline:.1f}s")
            elif isinstance(exc, LLMError):
                error = exc
            elif isinstance(
                exc, self._openai.OpenAIError | ValueError | TypeError | AttributeError
            ):
                error = LLMError(_describe(exc))
            else:
                raise
            if meter is not None:
                meter.failed(what, error, latency)
            raise error from exc
        finally:
            watchdog.cancel()
            client.close()
        latency = (time.perf_counter() - started) * 1000
        usage = response.usage
        completion = Completion(
            text=text.strip(),
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            latency_ms=latency,
            model=str(getattr(response, "model", "") or ""),
        )
        if meter is not None:
            meter.add(completion)
        return completion

    def close(self) -> None:
        """Nothing to release: every call opens and closes its own connection."""


def _check_answer(text: str) -> None:
    """An answer that cannot be stored (NUL, lone surrogates) is as unusable as none."""
    try:
        check_text(text, "the model's answer")
    except InvalidInputError as exc:
        raise LLMError(str(exc)) from None


def _describe(exc: Exception) -> str:
    name = type(exc).__name__
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{name}: {text}"[:300] if text else name
