"""The whole HTTP API fuzzed from its own OpenAPI schema (schemathesis), against a real
server process: no 5xx and no answer outside the schema, in a bounded number of cases."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.http_server import Server

#: Cases per operation (PARTNER_MEMORY_FUZZ_EXAMPLES raises it for a longer run).
EXAMPLES = int(os.environ.get("PARTNER_MEMORY_FUZZ_EXAMPLES", "25"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    database = str(Path(tmp_path_factory.mktemp("fuzz")) / "fuzz.db")
    server = Server(database)
    with server.client() as client:  # something to find: a namespace with a rolled unit
        for i in range(3):
            client.post(
                "/v1/namespaces/agent/turns",
                json={"user_input": f"question {i}", "assistant_output": f"answer {i}"},
            )
        client.post("/v1/namespaces/agent/roll")
    yield server
    server.stop()


def test_no_request_makes_the_service_fail(served: Server) -> None:
    """Each operation of the schema, `EXAMPLES` generated requests: every answer below 500
    and as the schema says (status, content type, body), and the server still up."""
    schema = schemathesis.openapi.from_url(f"{served.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 17
    for operation in operations:
        _fuzz(operation, served.url)
        assert httpx.get(f"{served.url}/healthz").status_code == 200


def _fuzz(operation: Any, url: str) -> None:
    @given(case=operation.as_strategy())
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def fuzz(case: Any) -> None:
        # "schema-valid data must be accepted" is left out: the library refuses more than
        # a JSON schema can say (control characters, unknown ids) - with a named 422
        response = case.call_and_validate(base_url=url, excluded_checks=[positive_data_acceptance])
        assert response.status_code < 500, (operation.label, response.text)

    fuzz()
