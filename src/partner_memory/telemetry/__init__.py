"""What memory is doing, for the operator's own tools: OpenTelemetry traces and metrics
(`instruments`, the API only: a no-op until an SDK is configured), the SDK set up for
`serve` (`sdk`, the `telemetry` extra), and JSON logs (`logs`); the gauges read from the
database are `partner_memory.store_gauges` (they read the store, which telemetry does
not import). `names` lists every span, attribute and metric name."""
