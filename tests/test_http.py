"""The HTTP service end to end, against a real server process on a loopback port: every
route, its errors (404/409/413/422, never a 500), and keys (401/403 changing nothing)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from partner_memory.cli import app
from partner_memory.store import open_store
from tests.http_server import Server, make_key

NS = "agent-42%2Fmain"  # the namespace "agent-42/main", escaped in a path


@pytest.fixture
def database(tmp_path: Path) -> str:
    return str(tmp_path / "served.db")


@pytest.fixture
def server(database: str) -> Iterator[Server]:
    running = Server(database)
    yield running
    running.stop()


def _converse(client: httpx.Client) -> dict[str, Any]:
    for said, answer in [
        ("I adopted a cat named Luna", "Lovely! What colour is she?"),
        ("Black with white paws", "Sounds adorable"),
        ("We fly to Kyoto in April", "I will remember the trip"),
    ]:
        made = client.post(
            f"/v1/namespaces/{NS}/turns", json={"user_input": said, "assistant_output": answer}
        )
        assert made.status_code == 201, made.text
    rolled = client.post(f"/v1/namespaces/{NS}/roll")
    assert rolled.status_code == 200, rolled.text
    document: dict[str, Any] = rolled.json()
    assert document["rolled"] is True
    return document


def test_memory_over_http_end_to_end(server: Server) -> None:
    with server.client() as client:
        assert client.get("/readyz").json() == {"status": "ready"}
        created = client.post("/v1/namespaces", json={"namespace": "agent-42/main"})
        assert created.status_code == 201
        assert created.json()["namespace"] == "agent-42/main"
        assert client.post("/v1/namespaces", json={"namespace": "agent-42/main"}).status_code == 409
        rolled = _converse(client)
        unit_id, slice_id = rolled["unit_id"], rolled["slice"]["id"]
        units = client.get(f"/v1/namespaces/{NS}/units", params={"limit": 5}).json()
        assert [u["id"] for u in units["units"]] == [unit_id]
        unit = client.get(f"/v1/namespaces/{NS}/units/{unit_id}", params={"messages": True})
        assert unit.json()["unit"]["message_count"] == len(unit.json()["messages"])
        shown = client.get(f"/v1/namespaces/{NS}/units/{unit_id}/slices/{slice_id}").json()
        assert shown["slice"]["id"] == slice_id
        assert any("Luna" in m["content"] for m in shown["messages"])
        luna = next(s for s in shown["provenance"] if "Luna" in s["text"])  # its messages
        at = luna["positions"][0] - shown["slice"]["start_index"]
        assert "Luna" in shown["messages"][at]["content"]
        assert luna["supported"] is True
        # the short ids the command line takes (an unambiguous prefix)
        short = client.get(f"/v1/namespaces/{NS}/units/{unit_id[:8]}/slices/{slice_id[:6]}")
        assert short.json() == shown
        assert (
            client.get(f"/v1/namespaces/{NS}/units/{unit_id[:8]}").json()["unit"]["id"] == unit_id
        )
        nothing = client.get(f"/v1/namespaces/{NS}/units/zzzz")
        assert (nothing.status_code, nothing.json()["error"]["code"]) == (404, "not_found")
        found = client.post(f"/v1/namespaces/{NS}/recall", json={"query": "cat name", "k": 3})
        assert found.status_code == 200
        luna = found.json()["hits"][0]["message"]
        assert "Luna" in luna["content"]
        window = client.get(f"/v1/namespaces/{NS}/window").json()["messages"]
        client.post(
            f"/v1/namespaces/{NS}/messages",
            json={"messages": [{"role": "user", "content": "Also: no seafood", "id": "m-1"}]},
        )
        after = client.get(f"/v1/namespaces/{NS}/window").json()["messages"]
        assert [m["id"] for m in after] == [m["id"] for m in window] + ["m-1"]
        blocks = client.get(f"/v1/namespaces/{NS}/context").json()["blocks"]
        assert "dialog_history" in {b["name"] for b in blocks}
        xml = client.get(f"/v1/namespaces/{NS}/context", params={"format": "xml"})
        assert xml.headers["content-type"].startswith("application/xml")
        assert "<dialog_history" in xml.text
        # content negotiation: Accept chooses when ?format= does not
        url = f"/v1/namespaces/{NS}/context"
        for accept, kind in [
            ("application/xml", "application/xml"),
            ("text/xml", "application/xml"),
            ("application/json", "application/json"),
            ("*/*", "application/json"),
            ("application/json;q=0.5, application/xml", "application/xml"),
            ("text/html, application/xml;q=0.9", "application/xml"),
        ]:
            answer = client.get(url, headers={"Accept": accept})
            assert answer.headers["content-type"].startswith(kind), accept
        assert client.get(url, headers={"Accept": "application/xml"}).text == xml.text
        forced = client.get(url, params={"format": "json"}, headers={"Accept": "application/xml"})
        assert forced.headers["content-type"].startswith("application/json")
        refused = client.get(url, headers={"Accept": "image/png"})
        assert (refused.status_code, refused.json()["error"]["code"]) == (406, "not_acceptable")
        stats = client.get(f"/v1/namespaces/{NS}/stats").json()
        assert stats["rolling_totals"]["rolling_count"] == 1
        log = client.get(f"/v1/namespaces/{NS}/rollings").json()["rollings"]
        assert [r["seq"] for r in log] == [1]
        session = client.post(f"/v1/namespaces/{NS}/session/end").json()
        assert session["memory_session_id"]
        forgot = client.post(
            f"/v1/namespaces/{NS}/forget/messages", json={"message_ids": [luna["id"]]}
        )
        assert forgot.json()["message_count"] == 1
        again = client.post(f"/v1/namespaces/{NS}/recall", json={"query": "Luna"}).json()
        assert all("Luna" not in h["message"]["content"] for h in again["hits"])
        shown = client.get(f"/v1/namespaces/{NS}/units/{unit_id}/slices/{slice_id}").json()
        assert all("Luna" not in m["content"] for m in shown["messages"])
        assert (
            client.delete(f"/v1/namespaces/{NS}/units/{unit_id[:8]}").json()["unit_id"] == unit_id
        )
        assert client.get(f"/v1/namespaces/{NS}/units/{unit_id}").status_code == 404
        assert client.delete(f"/v1/namespaces/{NS}").status_code == 200
        assert client.get("/v1/namespaces").json()["namespaces"] == []


def test_bad_requests_are_4xx_naming_the_problem(server: Server) -> None:
    with server.client() as client:
        _converse(client)
        bad = client.post(f"/v1/namespaces/{NS}/recall", json={"query": "x", "k": 0})
        assert bad.status_code == 422
        assert bad.json()["error"]["fields"][0]["field"] == "body.k"
        extra = client.post(
            f"/v1/namespaces/{NS}/turns",
            json={"user_input": "a", "assistant_output": "b", "colour": "red"},
        )
        assert extra.status_code == 422
        assert "colour" in extra.text
        nul = client.post(
            f"/v1/namespaces/{NS}/turns", json={"user_input": "a\x00b", "assistant_output": "c"}
        )
        assert nul.status_code == 422
        assert "user_input" in nul.json()["error"]["message"] or "NUL" in nul.text
        assert client.post(f"/v1/namespaces/{NS}/recall", content=b"{").status_code == 422
        window = client.get(f"/v1/namespaces/{NS}/window").json()
        surrogate = client.post(  # JSON may escape one; no backend can store it
            f"/v1/namespaces/{NS}/messages",
            content=b'{"messages": [{"role": "user", "content": "a", "metadata": {"k": "\\ud800"}}]}',
            headers={"content-type": "application/json"},
        )
        assert surrogate.status_code == 422
        assert "metadata is not valid Unicode" in surrogate.json()["error"]["message"]
        assert client.get(f"/v1/namespaces/{NS}/window").json() == window
        unknown = client.get("/v1/namespaces/nobody/window")
        assert unknown.status_code == 404
        assert unknown.json()["error"]["message"] == "namespace 'nobody' not found"
        assert client.get(f"/v1/namespaces/{NS}/units/no-such-unit").status_code == 404
        big = client.post(
            f"/v1/namespaces/{NS}/turns",
            json={"user_input": "x" * (5 * 1024 * 1024), "assistant_output": "y"},
        )
        assert big.status_code == 413
        stats = client.get(f"/v1/namespaces/{NS}/stats").json()
        assert stats["rolling_totals"]["rolling_count"] == 1  # nothing of the above stored


#: (method, path, body, scope it needs) of every /v1 route, on namespace agent-42/main.
ROUTES: list[tuple[str, str, dict[str, Any] | None, str]] = [
    ("GET", f"/v1/namespaces/{NS}/stats", None, "read"),
    ("GET", f"/v1/namespaces/{NS}/rollings", None, "read"),
    ("GET", f"/v1/namespaces/{NS}/window", None, "read"),
    ("GET", f"/v1/namespaces/{NS}/context", None, "read"),
    ("GET", f"/v1/namespaces/{NS}/units", None, "read"),
    ("GET", f"/v1/namespaces/{NS}/units/UNIT", None, "read"),
    ("GET", f"/v1/namespaces/{NS}/units/UNIT/slices/SLICE", None, "read"),
    ("POST", f"/v1/namespaces/{NS}/recall", {"query": "cat"}, "read"),
    ("POST", "/v1/namespaces", {"namespace": "agent-42/main"}, "write"),
    ("POST", f"/v1/namespaces/{NS}/turns", {"user_input": "a", "assistant_output": "b"}, "write"),
    (
        "POST",
        f"/v1/namespaces/{NS}/messages",
        {"messages": [{"role": "user", "content": "c"}]},
        "write",
    ),
    ("POST", f"/v1/namespaces/{NS}/roll", None, "write"),
    ("POST", f"/v1/namespaces/{NS}/session/end", None, "write"),
    ("POST", f"/v1/namespaces/{NS}/forget/messages", {"message_ids": ["MESSAGE"]}, "admin"),
    ("DELETE", f"/v1/namespaces/{NS}/units/UNIT/slices/SLICE", None, "admin"),
    ("DELETE", f"/v1/namespaces/{NS}/units/UNIT", None, "admin"),
    ("DELETE", f"/v1/namespaces/{NS}", None, "admin"),
]


def test_keys_open_namespaces_up_to_their_scope(database: str) -> None:
    """Every route x {no key, revoked key, another namespace's key, a key of a lower scope}:
    401 or 403, and the stored memory is exactly as it was."""
    server = Server(database)
    try:
        _, admin = make_key(database, "*", "admin")
        with server.client(admin) as client:
            rolled = _converse(client)
            luna = client.post(f"/v1/namespaces/{NS}/recall", json={"query": "Luna"}).json()
        names = {
            "UNIT": rolled["unit_id"],
            "SLICE": rolled["slice"]["id"],
            "MESSAGE": luna["hits"][0]["message"]["id"],
        }
        revoked_id, revoked = make_key(database, "*", "admin")
        assert (
            CliRunner().invoke(app, ["keys", "revoke", revoked_id, "--db", database]).exit_code == 0
        )
        _, elsewhere = make_key(database, "agent-7/*", "admin")
        _, reader = make_key(database, "agent-42/*", "read")
        _, writer = make_key(database, "agent-42/*", "write")
        store = open_store(database)
        before = store.export_namespace("agent-42/main")
        for method, route, body, scope in ROUTES:
            path = route
            for name, value in names.items():
                path = path.replace(name, value)
            tries: list[tuple[str | None, int]] = [
                (None, 401),
                ("pm_000000000000_" + "x" * 43, 401),
                (revoked, 401),
                (elsewhere, 403),
            ]
            if scope != "read":
                tries.append((reader, 403))
            if scope == "admin":
                tries.append((writer, 403))
            for token, status in tries:
                with server.client(token) as client:
                    answer = client.request(method, path, json=body)
                assert answer.status_code == status, (method, path, token, answer.text)
                assert "error" in answer.json()
        assert store.export_namespace("agent-42/main") == before
        with server.client(reader) as client:  # and what the key may do, it does
            assert client.get(f"/v1/namespaces/{NS}/stats").status_code == 200
            listed = client.get("/v1/namespaces").json()["namespaces"]
            assert [n["namespace"] for n in listed] == ["agent-42/main"]
        with server.client(elsewhere) as client:
            assert client.get("/v1/namespaces").json()["namespaces"] == []
        with server.client() as client:  # health needs no key
            assert client.get("/healthz").status_code == 200
        store.close()
        listed = CliRunner().invoke(app, ["keys", "list", "--db", database, "--json"])
        keys = json.loads(listed.output)["keys"]
        assert [k["revoked_at"] is not None for k in keys] == [False, True, False, False, False]
        assert all("hash" not in k and "token" not in k for k in keys)
    finally:
        log = server.stop()
    assert admin not in log  # no key or message body is logged
    assert "Luna" not in log


def test_a_restricted_key_pages_through_its_own_namespaces(database: str) -> None:
    """Other tenants fill no page and are not counted: the key's glob filters the query."""
    store = open_store(database)
    for i in range(150):  # sorted before the key's own
        store.ensure_namespace(f"aa-tenant-{i:03d}", "s")
    for i in range(3):
        store.ensure_namespace(f"agent-42/{i}", "s")
    store.close()
    _, own = make_key(database, "agent-42/*", "read")
    server = Server(database)
    try:
        with server.client(own) as client:
            first = client.get("/v1/namespaces", params={"limit": 2}).json()
            assert [n["namespace"] for n in first["namespaces"]] == ["agent-42/0", "agent-42/1"]
            assert (first["total"], first["next_after"]) == (3, "agent-42/1")
            rest = client.get("/v1/namespaces", params={"after": first["next_after"]}).json()
            assert [n["namespace"] for n in rest["namespaces"]] == ["agent-42/2"]
            assert rest["next_after"] is None
        with server.client() as client:  # keys exist: no key, no listing
            assert client.get("/v1/namespaces").status_code == 401
    finally:
        server.stop()


def test_serve_says_where_it_listens_and_its_docs_need_no_network(database: str) -> None:
    running = Server(database)
    try:
        with running.client() as client:
            html = client.get("/docs")
            assert html.status_code == 200
            assert "http" not in html.text.replace(running.url, "")  # nothing from elsewhere
            script = client.get("/static-offline-docs/swagger-ui-bundle.js")
            assert (script.status_code, "SwaggerUIBundle" in script.text) == (200, True)
    finally:
        said = running.stop()
    assert f"on {running.url}/" in said


def test_serve_refuses_what_would_not_be_safe_or_work(database: str) -> None:
    runner = CliRunner()
    workers = runner.invoke(app, ["serve", "--db", database, "--workers", "2"])
    assert workers.exit_code != 0
    assert "PostgreSQL" in workers.output
    exposed = runner.invoke(app, ["serve", "--db", database, "--host", "0.0.0.0"])
    assert exposed.exit_code != 0
    assert "--insecure" in exposed.output
    bad = runner.invoke(
        app, ["keys", "create", "--namespaces", "*", "--scope", "root", "--db", database]
    )
    assert bad.exit_code == 4
    assert "scope" in bad.output
    missing = runner.invoke(app, ["keys", "revoke", "abc", "--db", database])
    assert missing.exit_code != 0
    assert "not found" in missing.output


@pytest.mark.postgres
def test_four_workers_on_postgresql_store_every_turn_once(pg_url: str) -> None:
    """Four worker processes over one PostgreSQL database, eight clients at once: every
    acknowledged turn is stored exactly once and recalled by any worker."""
    from concurrent.futures import ThreadPoolExecutor

    server = Server(pg_url, "--workers", "4")
    try:

        def talk(client_number: int) -> list[str]:
            ids = []
            with server.client() as client:
                for turn in range(15):
                    made = client.post(
                        f"/v1/namespaces/{NS}/turns",
                        json={
                            "user_input": f"client {client_number} turn {turn} kiwi",
                            "assistant_output": "noted",
                        },
                    )
                    assert made.status_code == 201, made.text
                    ids += [m["id"] for m in made.json()["messages"]]
            return ids

        with ThreadPoolExecutor(8) as pool:
            acknowledged = [i for ids in pool.map(talk, range(8)) for i in ids]
        with server.client() as client:
            client.post(f"/v1/namespaces/{NS}/roll")
            found = client.post(f"/v1/namespaces/{NS}/recall", json={"query": "kiwi", "k": 5})
            assert len(found.json()["hits"]) == 5
        from partner_memory.core import MemoryCore

        store = open_store(pg_url)
        core = MemoryCore(store, "agent-42/main", create=False)
        stored = [m.id for unit in core.unit_ids() for m in core.read_messages(unit)]
        window = [m.id for m in store.load_trajectory("agent-42/main").messages]
        store.close()
        assert len(stored) == len(set(stored))  # none twice in memory
        # the window keeps rolled messages as context too: it adds only the unrolled
        assert sorted({*stored, *window}) == sorted(acknowledged)  # each once, none lost
    finally:
        server.stop()


def test_inspect_serves_the_pages_read_only_on_loopback(database: str) -> None:
    """`partner-memory inspect`: the pages over a read-only store; nothing can be forgotten."""
    from partner_memory import PartnerMemory

    store = open_store(database)
    with PartnerMemory(store, "agent-42/main", idle_timer=False) as memory:
        memory.record_turn("I keep bees on the roof", "How many hives?")
        memory.roll_now()
    store.close()
    inspector = Server(database, command="inspect")
    url = inspector.url
    try:
        page = httpx.get(f"{url}/namespace", params={"ns": "agent-42/main"})
        assert page.status_code == 200
        assert "bees" in page.text
        assert 'class="forget"' not in page.text
        missing = httpx.get(f"{url}/unit", params={"ns": "agent-42/main"})  # no unit named
        assert missing.status_code == 422
        assert missing.headers["content-type"].startswith("text/html")
        assert "query.unit" in missing.text
        forced = httpx.post(
            f"{url}/forget",
            data={"ns": "agent-42/main", "target": "namespace", "confirmed": "yes"},
            headers={"Origin": url},
        )
        assert forced.status_code == 403
        assert "read-only" in forced.text
    finally:
        inspector.stop()
    store = open_store(database)
    assert store.get_namespace("agent-42/main") is not None
    store.close()


def test_routing_errors_use_the_service_envelope(server: Server) -> None:
    """Unknown routes, wrong methods and unknown domains answer {"error": ...}, never
    the framework's {"detail": ...}."""
    with server.client() as client:
        client.post("/v1/namespaces", json={"namespace": "agent-1"})
        for method, path, status, code in [
            ("GET", "/v1/nope", 404, "not_found"),
            ("GET", "/nope", 404, "not_found"),
            ("DELETE", "/healthz", 405, "method_not_allowed"),
            ("PUT", "/v1/namespaces", 405, "method_not_allowed"),
            ("GET", "/v1/namespaces/agent-1/context?domain=NOPE", 422, "invalid_input"),
        ]:
            answer = client.request(method, path)
            assert answer.status_code == status, (method, path, answer.text)
            body = answer.json()
            assert set(body) == {"error"}, body
            assert body["error"]["code"] == code
        assert "Allow" in client.delete("/healthz").headers
        page = client.get("/nope", headers={"Accept": "text/html"})  # a browser gets a page
        assert page.status_code == 404
        assert page.headers["content-type"].startswith("text/html")
        chosen = client.get(
            "/v1/namespaces/agent-1/context", params={"domain": ["MEMORY", "ACTION"]}
        )
        assert chosen.status_code == 200
