"""The OpenTelemetry SDK as `serve` sets it up, from the standard OTEL_* variables.

Only `serve` does this (an application embedding the library configures its
own SDK, or none). It needs the `telemetry` extra. Metrics always go to a
Prometheus reader, for /metrics; traces and metrics are also pushed over
OTLP (HTTP/protobuf) when an OTLP endpoint is configured or OTEL_*_EXPORTER
says `otlp`; `console` prints spans, for a look without a collector.
OTEL_SDK_DISABLED=true turns all of it off. A process whose providers were
already installed (by `opentelemetry-instrument`, say) is left alone.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from opentelemetry import metrics, trace

from partner_memory.errors import ConfigurationError

log = logging.getLogger(__name__)

EXTRA_HINT = (
    "install the telemetry extra (pip install -e '.[telemetry]' in a clone of partner-memory)"
)
DEFAULT_SERVICE_NAME = "partner-memory"


def _any_host(host: str | None) -> bool:
    return True


@dataclass(frozen=True)
class Exposition:
    """Metrics in Prometheus' text format, from the SDK's Prometheus reader."""

    registry: Any  # prometheus_client.CollectorRegistry

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def serve_on(self, port: int, permits: Callable[[str | None], bool] = _any_host) -> None:
        """Also expose the metrics on `port` of the loopback address, without keys, to
        requests whose `Host` `permits` serves (421 to the others, as the API answers:
        a page whose name is made to resolve to 127.0.0.1 reads nothing)."""
        from wsgiref.simple_server import WSGIRequestHandler, make_server

        from prometheus_client import make_wsgi_app
        from prometheus_client.exposition import ThreadingWSGIServer

        metrics_app = make_wsgi_app(self.registry)

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            host = environ.get("HTTP_HOST")
            if not permits(host):
                message = f"this service does not serve the host {host!r}"
                body = json.dumps({"error": {"code": "misdirected", "message": message}})
                start_response("421 Misdirected Request", [("Content-Type", "application/json")])
                return [body.encode()]
            return cast("Iterable[bytes]", metrics_app(environ, start_response))

        class Quiet(WSGIRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                """No line per scrape on stderr."""

        try:
            server = make_server("127.0.0.1", port, app, ThreadingWSGIServer, handler_class=Quiet)
        except OSError as exc:
            raise ConfigurationError(f"cannot serve metrics on 127.0.0.1:{port}: {exc}") from exc
        threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()


def _exporters(env: Mapping[str, str], signal: str) -> list[str]:
    """What OTEL_{signal}_EXPORTER names; unset: OTLP when an endpoint is configured."""
    named = env.get(f"OTEL_{signal.upper()}_EXPORTER", "").strip().lower()
    if named:
        return [e.strip() for e in named.split(",") if e.strip() and e.strip() != "none"]
    endpoints = ("OTEL_EXPORTER_OTLP_ENDPOINT", f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
    return ["otlp"] if any(env.get(name, "").strip() for name in endpoints) else []


def _installed() -> bool:
    """Whether the application installed providers of its own."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider) or (
        type(metrics.get_meter_provider()).__name__ != "_ProxyMeterProvider"
    )


def configure(environ: Mapping[str, str] | None = None) -> Exposition | None:
    """Install the SDK's providers as the environment says; the /metrics exposition, or
    None when the SDK is off, absent (the extra is not installed) or already set up."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if _installed():
        log.info("OpenTelemetry providers are already installed: /metrics is not served")
        return None
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
        from prometheus_client import CollectorRegistry
    except ImportError:
        return None
    named = {} if env.get("OTEL_SERVICE_NAME") else {"service.name": DEFAULT_SERVICE_NAME}
    resource = Resource.create(named)
    registry = CollectorRegistry()
    readers: list[MetricReader] = [PrometheusMetricReader(registry=registry)]
    for exporter in _exporters(env, "metrics"):
        if exporter == "otlp":
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter,
            )

            readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
        elif exporter != "prometheus":
            raise ConfigurationError(
                f"OTEL_METRICS_EXPORTER {exporter!r} is not one of otlp, prometheus, none"
            )
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))
    span_exporters = _exporters(env, "traces")
    if span_exporters:
        provider = TracerProvider(resource=resource)
        for exporter in span_exporters:
            if exporter == "otlp":
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )

                provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
            elif exporter == "console":
                # the stdout of now, not of when the SDK was imported
                console = ConsoleSpanExporter(out=sys.stdout)
                provider.add_span_processor(BatchSpanProcessor(console))
            else:
                raise ConfigurationError(
                    f"OTEL_TRACES_EXPORTER {exporter!r} is not one of otlp, console, none"
                )
        trace.set_tracer_provider(provider)
    return Exposition(registry)


def require_sdk() -> None:
    """ConfigurationError naming the extra when the SDK is not installed."""
    try:
        import opentelemetry.exporter.prometheus
        import opentelemetry.sdk  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(f"metrics need the OpenTelemetry SDK: {EXTRA_HINT}") from exc
