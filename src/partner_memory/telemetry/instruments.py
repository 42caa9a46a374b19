"""Traces and metrics through the OpenTelemetry API: a no-op until an SDK is configured.

The library never configures telemetry; the application does (or `serve`,
with the `telemetry` extra). Instruments are made once per pair of global
providers and remade when the application installs others, so a provider
set after the first turn is used from the next one on.

Nothing here records what was said: message text, queries and summaries
reach a span only when the operator opts in with the GenAI conventions'
switch, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true. Metrics
never carry a namespace (a label per user would grow without bound).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from importlib.metadata import version as _version
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.metrics import _internal as _metrics_globals
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode

from partner_memory.telemetry import names as n

SCOPE = "partner_memory"
VERSION = _version("partner-memory")
CAPTURE_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_CAPTURING = {"true", "1", "yes", "on", "span_only", "span_and_event"}

Attributes = Mapping[str, Any]
#: What an observed gauge reports: (value, attributes) pairs, read at collection.
Observer = Callable[[], Iterable[tuple[float, Attributes]]]

#: Buckets for durations in seconds, from a fast turn (0.2 ms) to a slow LLM (2 min).
DURATION_BUCKETS = (
    0.0002,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
)


def capturing_content() -> bool:
    """Whether the operator asked for message text, queries and summaries in spans."""
    return os.environ.get(CAPTURE_VARIABLE, "").strip().lower() in _CAPTURING


class Instruments:
    """The tracer and every instrument of one pair of providers."""

    def __init__(self, tracer_provider: trace.TracerProvider, meter_provider: Any) -> None:
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        #: Whether an SDK is installed: without one, spans and durations are skipped
        #: outright (the API's no-ops still cost a turn a few per cent).
        self.active = not isinstance(
            tracer_provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider
        ) or type(meter_provider).__name__ not in ("_ProxyMeterProvider", "NoOpMeterProvider")
        self.tracer = tracer_provider.get_tracer(SCOPE, VERSION)
        meter = meter_provider.get_meter(SCOPE, VERSION)

        def seconds(name: str, description: str) -> Any:
            return meter.create_histogram(
                name,
                unit="s",
                description=description,
                explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
            )

        self.operation_duration = seconds(
            n.OPERATION_DURATION, "Memory operations (record, search, forget), end to end."
        )
        self.recall_duration = seconds(
            n.RECALL_DURATION, "Recall by phase: index catch-up, engine search, reading hits."
        )
        self.rolling_duration = seconds(n.ROLLING_DURATION, "A rolling: summarise and commit.")
        self.llm_duration = seconds(n.LLM_DURATION, "GenAI client calls (chat completions).")
        self.store_wait = seconds(
            n.STORE_WAIT, "Waiting for the database: SQLite's write turn, a pool connection."
        )
        self.http_duration = seconds(n.HTTP_DURATION, "HTTP requests served.")
        self.recall_hits = meter.create_histogram(
            n.RECALL_HITS, unit="{hit}", description="Hits a recall returned."
        )
        self.llm_tokens = meter.create_histogram(
            n.LLM_TOKENS, unit="{token}", description="Tokens per GenAI client call, by type."
        )
        count = meter.create_counter
        self.messages_recorded = count(n.MESSAGES_RECORDED, "{message}", "Messages recorded.")
        self.rollings = count(n.ROLLINGS_DONE, "{rolling}", "Rollings committed (or failed).")
        self.rolled_messages = count(n.ROLLED_MESSAGES, "{message}", "Messages rolled.")
        self.fallbacks = count(n.ROLLING_FALLBACKS, "{fallback}", "Summarisers that fell back.")
        self.unsupported = count(
            n.UNSUPPORTED_SENTENCES, "{sentence}", "Summary sentences no message supports."
        )
        self.forgets = count(n.FORGETS, "{forget}", "Forgets, by what was forgotten.")
        self.consumer_applied = count(n.CONSUMER_APPLIED, "{rolling}", "Rollings applied.")
        self.consumer_failures = count(n.CONSUMER_FAILURES, "{failure}", "Failed applies.")
        self.lease_takeovers = count(n.LEASE_TAKEOVERS, "{lease}", "Leases taken from the dead.")
        for name, unit, description in OBSERVED:
            meter.create_observable_gauge(
                name, callbacks=[_observe(name)], unit=unit, description=description
            )


_ABSENT = object()


class _Made:
    """The instruments made last, for which pair of installed providers, and the lock
    under which others replace them."""

    lock = threading.Lock()
    current: Instruments | None = None
    installed: tuple[object, object] = (object(), object())


def _installed() -> tuple[object, object]:
    """The providers the application installed (None: none yet), read from the API's own
    globals: its getters look the environment up on each call, a few per cent of a
    turn when nothing is installed. A version without them falls back on the getters."""
    tracer_provider = getattr(trace, "_TRACER_PROVIDER", _ABSENT)
    meter_provider = getattr(_metrics_globals, "_METER_PROVIDER", _ABSENT)
    return (
        trace.get_tracer_provider() if tracer_provider is _ABSENT else tracer_provider,
        metrics.get_meter_provider() if meter_provider is _ABSENT else meter_provider,
    )


def instruments() -> Instruments:
    """The instruments of the global providers as they are now."""
    installed = _installed()
    made = _Made.current
    if (
        made is not None
        and installed[0] is _Made.installed[0]
        and installed[1] is _Made.installed[1]
    ):
        return made
    with _Made.lock:
        made = Instruments(trace.get_tracer_provider(), metrics.get_meter_provider())
        _Made.current, _Made.installed = made, _installed()
        return made


# -- spans ------------------------------------------------------------------------------


#: What `span` and `operation` give when no SDK is installed: the API's invalid span.
_IDLE: AbstractContextManager[Span] = nullcontext(INVALID_SPAN)


def span(
    name: str, attributes: Attributes, *, kind: SpanKind = SpanKind.INTERNAL
) -> AbstractContextManager[Span]:
    """A span that names the error type of whatever escapes it."""
    parts = instruments()
    return _span(parts, name, attributes, kind) if parts.active else _IDLE


@contextmanager
def _span(parts: Instruments, name: str, attributes: Attributes, kind: SpanKind) -> Iterator[Span]:
    with parts.tracer.start_as_current_span(
        name,
        kind=kind,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except BaseException as exc:
            escaped(current, exc)
            raise


def escaped(current: Span, exc: BaseException) -> None:
    """An exception on a span: its type always; its message and stack only with content
    capture on (a library error may quote what it was given)."""
    kind = type(exc).__qualname__
    current.set_attribute(n.ERROR_TYPE, kind)
    current.set_status(Status(StatusCode.ERROR, kind))
    if capturing_content():
        current.record_exception(exc)
    else:
        current.add_event("exception", {"exception.type": kind})


def operation(
    name: str, namespace: str, attributes: Attributes | None = None
) -> AbstractContextManager[Span]:
    """A memory operation (`update_memory`, `search_memory`, ...): its span, named by the
    operation, and its duration in `partner_memory.operation.duration`."""
    parts = instruments()
    return _operation(parts, name, namespace, attributes) if parts.active else _IDLE


@contextmanager
def _operation(
    parts: Instruments, name: str, namespace: str, attributes: Attributes | None
) -> Iterator[Span]:
    labels = {n.OPERATION: name}
    named = {**labels, n.MEMORY_NAMESPACE: namespace, **(attributes or {})}
    with (
        measured(parts.operation_duration, labels),
        _span(parts, name, named, SpanKind.INTERNAL) as current,
    ):
        yield current


@contextmanager
def measured(histogram: Any, labels: Attributes) -> Iterator[None]:
    """The block's duration in `histogram`, labelled with the error's type if it failed."""
    started = time.perf_counter()
    done = dict(labels)
    try:
        yield
    except BaseException as exc:
        done[n.ERROR_TYPE] = type(exc).__qualname__
        raise
    finally:
        histogram.record(time.perf_counter() - started, done)


# -- observed gauges ------------------------------------------------------------------

#: Gauges read at each collection from what `observe` registered: (name, unit, description).
OBSERVED = (
    (n.CONSUMER_LAG, "{rolling}", "Rollings a durable consumer has not applied yet."),
    (n.CONSUMER_LAGGING, "{namespace}", "Namespaces a durable consumer is behind in."),
    (n.WINDOW_MESSAGES, "{message}", "Messages in every window, not rolled yet."),
    (n.WINDOW_LONGEST, "{message}", "Messages in the longest window."),
    (n.LEASES, "{lease}", "Rolling leases, held or expired (a dead holder's)."),
    (n.NAMESPACES, "{namespace}", "Namespaces in the store."),
    (n.POOL_CONNECTIONS, "{connection}", "This process's database connections, by state."),
    (n.POOL_WAITING, "{request}", "Requests waiting for a database connection here."),
)

_observers: dict[int, Callable[[], Mapping[str, list[tuple[float, Attributes]]]]] = {}
_observers_lock = threading.Lock()


def observe(
    key: int, source: Callable[[], Mapping[str, list[tuple[float, Attributes]]]]
) -> Callable[[], None]:
    """Report `source()`'s gauges (by metric name) at each collection until the returned
    function is called; one source per `key` (a second replaces the first)."""
    with _observers_lock:
        _observers[key] = source

    def stop() -> None:
        with _observers_lock:
            if _observers.get(key) is source:
                del _observers[key]

    return stop


def _observe(name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def callback(options: CallbackOptions) -> Iterable[Observation]:
        with _observers_lock:
            sources = list(_observers.values())
        found = []
        for source in sources:
            for value, attributes in source().get(name, ()):
                found.append(Observation(value, dict(attributes)))
        return found

    return callback
