"""The inspector's cookie holds a session, not the key: another service on 127.0.0.1 that
is sent it learns no key, and it ends with its lifetime or the key's revocation."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from partner_memory import PartnerMemory, open_store
from partner_memory.cli import app
from partner_memory.keys import SESSION_LIFETIME_MS, KeyRing
from partner_memory.store import MemoryStore
from tests.conftest import ManualClock
from tests.http_server import Server, make_key


def test_the_cookie_is_a_session_named_by_port_that_opens_only_the_inspector(
    tmp_path: Path,
) -> None:
    database = str(tmp_path / "m.db")
    store = open_store(database)
    with PartnerMemory(store, "agent-1", idle_timer=False) as memory:
        memory.record_turn("I keep bees on the roof", "How many hives?")
    store.close()
    key_id, token = make_key(database, "agent-*", "read")
    server = Server(database)
    try:
        with server.client() as http:
            headers = {"Origin": server.url}
            login = http.post("/login", data={"key": token}, headers=headers)
            assert login.status_code == 303
            name = f"pm_inspector_{server.port}"
            session = login.cookies[name]
            secret = token.rsplit("_", 1)[1]
            assert token not in session
            assert secret not in session
            assert "bees" in http.get("/namespace", params={"ns": "agent-1"}).text
            api = http.get(  # the session is no key for the API
                "/v1/namespaces", headers={"Authorization": f"Bearer {session}"}
            )
            assert api.status_code == 401
            revoked = CliRunner().invoke(app, ["keys", "revoke", key_id, "--db", database])
            assert revoked.exit_code == 0, revoked.output
            again = http.get("/namespace", params={"ns": "agent-1"})
            assert again.status_code == 303  # to the login page
            assert again.headers["location"].startswith("/login")
    finally:
        server.stop()


def test_a_session_ends_with_its_lifetime_and_cannot_be_stretched(
    store: MemoryStore, manual_clock: ManualClock
) -> None:
    clock = manual_clock
    ring = KeyRing(store, clock)
    key, _ = ring.create("agent-*", "read")
    session = ring.session(key)
    assert ring.from_session(session) == key
    key_id, until, mac = session.split(".")
    assert ring.from_session(f"{key_id}.{int(until) + 3_600_000}.{mac}") is None
    other, _ = ring.create("agent-*", "admin")
    assert ring.from_session(f"{other.id}.{until}.{mac}") is None
    clock.advance(SESSION_LIFETIME_MS + 1)
    assert ring.from_session(session) is None
    assert ring.from_session("not a session") is None
