"""A real `serve`: /metrics scraped and parsed as Prometheus text, keys, the metrics port,
JSON request logs with request ids, and a failing consumer's lag growing."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from partner_memory import LogEntry
from partner_memory.service import MemoryService
from tests.http_server import Server, free_port, make_key

SECRET = "the vault opens with 8812-heron"


def scrape(url: str, token: str | None = None) -> dict[str, list[Any]]:
    """Samples by metric family name, from the Prometheus text at `url`."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    answer = httpx.get(url, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return {f.name: f.samples for f in text_string_to_metric_families(answer.text)}


def value(families: dict[str, list[Any]], sample: str, **labels: str) -> float | None:
    for samples in families.values():
        for s in samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return None


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Server, int, Path]]:
    database = tmp_path / "served.db"
    metrics_port = free_port()
    server = Server(str(database), "--log-format", "json", "--metrics-port", str(metrics_port))
    try:
        yield server, metrics_port, database
    finally:
        server.stop()


def test_metrics_are_prometheus_text_and_logs_are_json(
    served: tuple[Server, int, Path],
) -> None:
    server, metrics_port, _ = served
    with server.client() as client:
        said = client.post(
            "/v1/namespaces/agent-1/turns",
            json={"user_input": SECRET, "assistant_output": "noted"},
            headers={"X-Request-ID": "req-42"},
        )
        assert said.status_code == 201
        assert said.headers["x-request-id"] == "req-42"
        asked = client.post("/v1/namespaces/agent-1/recall", json={"query": "vault heron"})
        assert asked.status_code == 200
        assert len(asked.headers["x-request-id"]) == 32  # made here when none was given
        assert client.get("/v1/namespaces/nobody/units").status_code == 404
    families = scrape(f"{server.url}/metrics")
    assert value(families, "partner_memory_messages_recorded_total") == 2
    assert (
        value(
            families,
            "partner_memory_operation_duration_seconds_count",
            gen_ai_operation_name="search_memory",
        )
        == 1
    )
    route = "/v1/namespaces/{namespace}/turns"
    assert (
        value(
            families,
            "http_server_request_duration_seconds_count",
            http_route=route,
            http_response_status_code="201",
        )
        == 1
    )
    assert value(families, "partner_memory_window_messages") == 2
    assert value(families, "partner_memory_namespaces") == 1
    assert value(families, "partner_memory_leases", partner_memory_lease_state="expired") == 0
    # the same figures on the loopback metrics port, without a key
    assert (
        value(scrape(f"http://127.0.0.1:{metrics_port}/metrics"), "partner_memory_namespaces") == 1
    )
    # ...to the Hosts the API serves only (a rebinding page's name gets 421, as on the API)
    for url in (f"http://127.0.0.1:{metrics_port}/metrics", f"{server.url}/healthz"):
        foreign = httpx.get(url, headers={"Host": "evil.example:80"}, timeout=30)
        assert foreign.status_code == 421
        assert foreign.json()["error"]["code"] == "misdirected"
    local = httpx.get(f"http://localhost:{metrics_port}/metrics", timeout=30)
    assert local.status_code == 200

    output = server.stop()
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    requests = [line for line in lines if line.get("event") == "request"]
    turn = next(line for line in requests if line["request_id"] == "req-42")
    assert turn["method"] == "POST"
    assert turn["route"] == route
    assert turn["status"] == 201
    assert turn["namespace"] == "agent-1"
    assert turn["duration_ms"] >= 0
    assert turn["logger"] == "partner_memory.access"
    assert turn["level"] == "INFO"
    assert any(line["status"] == 404 for line in requests)
    assert "8812" not in output
    assert "heron" not in output


def test_metrics_need_a_key_that_reads_every_namespace(
    served: tuple[Server, int, Path],
) -> None:
    server, _, database = served
    _, narrow = make_key(str(database), "agent-*", "admin")
    key_id, wide = make_key(str(database), "*", "read")
    assert httpx.get(f"{server.url}/metrics", timeout=30).status_code == 401
    refused = httpx.get(
        f"{server.url}/metrics", headers={"Authorization": f"Bearer {narrow}"}, timeout=30
    )
    assert refused.status_code == 403
    assert "every namespace" in refused.json()["error"]["message"]
    assert value(scrape(f"{server.url}/metrics", wide), "partner_memory_namespaces") == 0
    output = server.stop()
    scraped = [json.loads(line) for line in output.splitlines() if '"/metrics"' in line]
    assert scraped
    assert scraped[-1]["key_id"] == key_id
    assert wide not in output
    assert narrow not in output


class Failing:
    """A durable consumer that cannot apply anything: it stays where it is."""

    name = "stuck"

    def apply(self, entry: LogEntry) -> Sequence[Any]:
        raise RuntimeError("the downstream index is unreachable")


def test_a_failing_consumer_shows_its_lag_growing(served: tuple[Server, int, Path]) -> None:
    server, metrics_port, database = served
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    # the consumer runs in another process on the same database, and fails
    watcher = MemoryService.open(str(database), idle_timer=False)
    try:
        watcher.register_consumer(Failing()).result()
        lags = []
        with server.client() as client:
            for rolling in range(3):
                for turn in range(2):
                    said = client.post(
                        "/v1/namespaces/agent-1/turns",
                        json={"user_input": f"q {rolling} {turn}", "assistant_output": "a"},
                    )
                    assert said.status_code == 201
                assert client.post("/v1/namespaces/agent-1/roll").json()["rolled"]
                watcher.catch_up()  # it tries, and fails again
                deadline = time.monotonic() + 60
                while True:  # the gauges are read at most once a second
                    lag = value(
                        scrape(url), "partner_memory_consumer_lag", partner_memory_consumer="stuck"
                    )
                    if lag == rolling + 1 or time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
                lags.append(lag)
        assert lags == [1, 2, 3]
        families = scrape(url)
        assert value(families, "partner_memory_consumer_lag", partner_memory_consumer="recall") == 0
        assert value(families, "partner_memory_rollings_total") == 3
    finally:
        watcher.close()
