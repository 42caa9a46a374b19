"""What memory is doing, for the operator's own tools: OpenTelemetry traces and metrics
(`instruments`, the API only: a no-op until an SDK is configured), gauges read from the
database (`health`), the SDK set up for `serve` (`sdk`, the `telemetry` extra), and
JSON logs (`logs`). `names` lists every span, attribute and metric name."""
