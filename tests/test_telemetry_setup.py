"""`serve`'s SDK set-up from the OTEL_* variables, and its refusals before listening."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import metrics, trace
from opentelemetry.test.globals_test import reset_metrics_globals, reset_trace_globals
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from partner_memory.cli import app
from partner_memory.errors import ConfigurationError
from partner_memory.telemetry import sdk
from partner_memory.telemetry.instruments import instruments
from partner_memory.telemetry.logs import log_config


@pytest.fixture(autouse=True)
def _globals() -> Iterator[None]:
    reset_trace_globals()
    reset_metrics_globals()
    yield
    for provider in (trace.get_tracer_provider(), metrics.get_meter_provider()):
        shutdown = getattr(provider, "shutdown", None)
        if shutdown is not None:
            shutdown()
    reset_trace_globals()
    reset_metrics_globals()


def test_metrics_go_to_the_prometheus_exposition_and_no_spans_by_default() -> None:
    exposition = sdk.configure({})
    assert exposition is not None
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)  # no exporter
    instruments().messages_recorded.add(3)
    body, content_type = exposition.render()
    assert content_type.startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    (sample,) = families["partner_memory_messages_recorded"].samples
    assert sample.value == 3
    info = families["target_info"].samples[0].labels
    assert info["service_name"] == "partner-memory"


def test_console_spans_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    assert sdk.configure({"OTEL_TRACES_EXPORTER": "console"}) is not None
    with instruments().tracer.start_as_current_span("probe"):
        pass
    provider = trace.get_tracer_provider()
    provider.shutdown()  # type: ignore[attr-defined]
    assert '"name": "probe"' in capsys.readouterr().out


def test_disabled_or_already_installed_leaves_the_process_alone() -> None:
    assert sdk.configure({"OTEL_SDK_DISABLED": "true"}) is None
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    from opentelemetry.sdk.trace import TracerProvider

    mine = TracerProvider()
    trace.set_tracer_provider(mine)
    assert sdk.configure({}) is None
    assert trace.get_tracer_provider() is mine


@pytest.mark.parametrize(
    ("variable", "value"),
    [("OTEL_TRACES_EXPORTER", "zipkin"), ("OTEL_METRICS_EXPORTER", "statsd")],
)
def test_an_unknown_exporter_is_named(variable: str, value: str) -> None:
    with pytest.raises(ConfigurationError, match=value):
        sdk.configure({variable: value})


def test_log_formats() -> None:
    assert log_config("text") is None
    config = log_config("json")
    assert config is not None
    assert config["loggers"]["partner_memory"]["level"] == "INFO"
    with pytest.raises(ConfigurationError, match="text or json"):
        log_config("xml")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--log-format", "xml"], "text or json"),
        (["--metrics-port", "9464", "--workers", "2", "--db", "postgresql://x/y"], "one process"),
        (["--metrics-port", "8000", "--port", "8000"], "must differ"),
        (["--metrics-port", "0"], "--metrics-port"),
    ],
)
def test_serve_refuses_before_listening(args: list[str], said: str) -> None:
    result = CliRunner().invoke(app, ["serve", *args])
    assert result.exit_code != 0
    assert said in result.output
