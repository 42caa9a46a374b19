"""DNS rebinding: a page whose name resolves to 127.0.0.1 gets nothing from `serve` or
`inspect`; the names the operator allows are served."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from partner_memory import PartnerMemory, open_store
from partner_memory.cli import app
from partner_memory.http.hosts import HostPolicy
from tests.http_server import MCP_ACCEPT, MCP_INITIALIZE, Server

REBOUND = "rebind.example"


def _remembered(database: str) -> None:
    store = open_store(database)
    with PartnerMemory(store, "agent-1", idle_timer=False) as memory:
        memory.record_turn("I keep bees on the roof", "How many hives?")
        memory.roll_now()
    store.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Server, str]]:
    database = str(tmp_path / "m.db")
    _remembered(database)
    running = Server(database, "--allowed-host", "memory.example")
    yield running, database
    running.stop()


def _as(server: Server, host: str) -> dict[str, str]:
    """What a browser sends from a page at http://HOST:PORT to its own origin."""
    named = f"{host}:{server.port}"
    return {"Host": named, "Origin": f"http://{named}"}


def test_a_rebinding_page_reads_and_forgets_nothing(served: tuple[Server, str]) -> None:
    server, database = served
    page = _as(server, REBOUND)
    with server.client() as http:
        for method, path, body in [
            ("GET", "/v1/namespaces", None),
            ("GET", "/v1/namespaces/agent-1/context", None),
            ("DELETE", "/v1/namespaces/agent-1", None),
            ("GET", "/namespace?ns=agent-1", None),
            ("POST", "/forget", {"ns": "agent-1", "target": "namespace", "confirmed": "yes"}),
            ("GET", "/healthz", None),
        ]:
            answer = http.request(method, path, headers=page, data=body)
            assert answer.status_code == 421, (method, path, answer.text)
            assert answer.json()["error"]["code"] == "misdirected"
            assert REBOUND in answer.json()["error"]["message"]
            assert "bees" not in answer.text
        mcp = http.post("/mcp?namespace=agent-1", json=MCP_INITIALIZE, headers=page | MCP_ACCEPT)
        assert mcp.status_code == 421
    store = open_store(database)
    try:
        assert store.get_namespace("agent-1") is not None
    finally:
        store.close()


def test_loopback_names_and_allowed_hosts_are_served(served: tuple[Server, str]) -> None:
    server, _ = served
    with server.client() as http:
        for host in ("127.0.0.1", "localhost", "LOCALHOST", "[::1]", "memory.example"):
            answer = http.get("/v1/namespaces", headers=_as(server, host))
            assert answer.status_code == 200, (host, answer.text)
        bare = http.get("/v1/namespaces", headers={"Host": "memory.example"})  # behind a proxy
        assert bare.status_code == 200
        # the MCP SDK's own check is on, with the same list: an allowed Host from a
        # foreign Origin is refused there, from the Host's own origin it is served
        allowed = {"Host": "memory.example", "Origin": "https://memory.example"}
        mcp = http.post("/mcp?namespace=agent-1", json=MCP_INITIALIZE, headers=allowed | MCP_ACCEPT)
        assert mcp.status_code == 200, mcp.text
        foreign = allowed | {"Origin": f"http://{REBOUND}"}
        mcp = http.post("/mcp?namespace=agent-1", json=MCP_INITIALIZE, headers=foreign | MCP_ACCEPT)
        assert mcp.status_code == 403


def test_the_inspector_refuses_a_rebinding_page(tmp_path: Path) -> None:
    database = str(tmp_path / "m.db")
    _remembered(database)
    inspector = Server(database, command="inspect")
    try:
        url = inspector.url
        assert "bees" in httpx.get(f"{url}/namespace", params={"ns": "agent-1"}).text
        named = f"{REBOUND}:{inspector.port}"
        rebound = httpx.get(f"{url}/namespace?ns=agent-1", headers={"Host": named})
        assert rebound.status_code == 421
        assert "bees" not in rebound.text
    finally:
        inspector.stop()


@pytest.mark.parametrize(
    ("bind", "extra", "host", "served"),
    [
        ("127.0.0.1", [], "127.0.0.1:8000", True),
        ("127.0.0.1", [], "localhost:8000", True),
        ("127.0.0.1", [], "localhost:8001", True),  # no page can be given a loopback name
        ("10.1.2.3", [], "10.1.2.3:8001", False),
        ("127.0.0.1", [], "evil.example:8000", False),
        ("127.0.0.1", [], "evil.example:abc", False),
        ("127.0.0.1", ["Memory.Example"], "memory.example:443", True),
        ("127.0.0.1", ["memory.example:8443"], "memory.example:443", False),
        ("127.0.0.1", ["*"], "evil.example", True),
        ("10.1.2.3", [], "10.1.2.3:8000", True),
        ("::1", [], "[::1]:8000", True),
        ("0.0.0.0", [], "anything.example", True),  # networked: keys guard it
        ("0.0.0.0", ["memory.example"], "anything.example", False),
    ],
)
def test_host_policy(bind: str, extra: list[str], host: str, served: bool) -> None:
    policy = HostPolicy.for_serving(bind, 8000, extra)
    assert policy.permits(host) is served
    assert HostPolicy.from_env_value(policy.env_value()) == policy


def test_a_malformed_allowed_host_is_refused_before_serving(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["serve", "--db", str(tmp_path / "m.db"), "--allowed-host", "memory.example:x"]
    )
    assert result.exit_code != 0
    assert "--allowed-host 'memory.example:x'" in result.output
