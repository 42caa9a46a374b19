"""What telemetry costs a turn: `record_turn` with no SDK (the API's no-ops, what an
application that configures nothing pays), with the SDK as `serve` sets it up (spans
batched to an exporter, metrics to the Prometheus reader), the instrumentation of one
turn alone, and OpenAI Agents' SQLiteSession adding the same two items beside them.

Rounds alternate the contenders in one process; each figure is the median over the
rounds of each round's median turn (microseconds), on one SQLite file per contender.

Usage: python benchmarks/bench_telemetry.py [--turns 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from opentelemetry import metrics, trace
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.test.globals_test import reset_metrics_globals, reset_trace_globals
from prometheus_client import CollectorRegistry, generate_latest

from partner_memory import PartnerMemory
from partner_memory.rolling import RollingSettings
from partner_memory.store.sqlite import SQLiteStore
from partner_memory.telemetry import names as n
from partner_memory.telemetry.instruments import instruments, operation


class Discarding(SpanExporter):
    """An exporter that drops what it is given: the SDK's own cost, no network's."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def median_us(turn: Callable[[int], None], turns: int) -> float:
    laps = []
    for i in range(turns):
        began = time.perf_counter()
        turn(i)
        laps.append(time.perf_counter() - began)
    return statistics.median(laps) * 1e6


def no_sdk() -> None:
    reset_trace_globals()
    reset_metrics_globals()


def with_sdk() -> tuple[TracerProvider, MeterProvider, CollectorRegistry]:
    no_sdk()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(Discarding()))
    registry = CollectorRegistry()
    meter_provider = MeterProvider(metric_readers=[PrometheusMetricReader(registry=registry)])
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    return tracer_provider, meter_provider, registry


def instrumentation_alone(i: int) -> None:
    """The telemetry calls one `record_turn` makes, without the turn."""
    with operation(n.UPDATE_MEMORY, "agent", {n.MESSAGES: 2}) as span:
        span.set_attribute(n.WINDOW_LENGTH, i)
        instruments().messages_recorded.add(2)
        instruments().store_wait.record(0.0001, {n.DB_SYSTEM: "sqlite"})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from agents import SQLiteSession

    results: dict[str, list[float]] = {}
    settings = RollingSettings(max_messages=72)  # rollings as in production, offline
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.rounds):

            def ours(label: str, round_: int = round_) -> None:
                store = SQLiteStore(Path(folder) / f"{label}-{round_}.db")
                with PartnerMemory(
                    store, "agent", idle_timer=False, owns_store=True, settings=settings
                ) as memory:
                    results.setdefault(label, []).append(
                        median_us(lambda i: memory.record_turn(f"hello {i}", "hi"), args.turns)
                    )

            no_sdk()
            ours("record_turn, no SDK")
            results.setdefault("instrumentation alone, no SDK", []).append(
                median_us(instrumentation_alone, args.turns)
            )
            tracer_provider, meter_provider, registry = with_sdk()
            ours("record_turn, SDK (spans batched, Prometheus reader)")
            results.setdefault("instrumentation alone, SDK", []).append(
                median_us(instrumentation_alone, args.turns)
            )
            scrape = time.perf_counter()
            generate_latest(registry)
            results.setdefault("one /metrics rendering", []).append(
                (time.perf_counter() - scrape) * 1e6
            )
            tracer_provider.shutdown()
            meter_provider.shutdown()
            no_sdk()
            session = SQLiteSession("agent", str(Path(folder) / f"peer-{round_}.db"))
            # one event loop for the whole run, as an application keeps one: a loop made
            # per call (asyncio.run) cost the peer more than its own work
            loop = asyncio.new_event_loop()

            def peer(
                i: int, session: SQLiteSession = session, loop: asyncio.AbstractEventLoop = loop
            ) -> None:
                loop.run_until_complete(
                    session.add_items(
                        [
                            {"role": "user", "content": f"hello {i}"},
                            {"role": "assistant", "content": "hi"},
                        ]
                    )
                )

            results.setdefault("OpenAI SQLiteSession.add_items (2 items)", []).append(
                median_us(peer, args.turns)
            )
            loop.close()
            session.close()
    base = statistics.median(results["record_turn, no SDK"])
    print(f"{args.turns} turns x {args.rounds} rounds, SQLite (WAL, synchronous=FULL)")
    print("| contender | median µs | / record_turn, no SDK |")
    print("| --- | --- | --- |")
    for label, values in results.items():
        value = statistics.median(values)
        print(f"| {label} | {value:.1f} | {value / base:.3f}x |")


if __name__ == "__main__":
    main()
