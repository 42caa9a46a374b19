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


def _filled(database: str) -> tuple[str, str, list[str]]:
    """A namespace with a rolled unit: (unit id, slice id, its message ids)."""
    from partner_memory.core import MemoryCore

    store = open_store(database)
    try:
        with PartnerMemory(store, "agent-1", idle_timer=False) as memory:
            memory.record_turn("I keep bees on the roof", "How many hives?")
            memory.record_turn("Three hives, and a fourth in May", "Noted")
            memory.roll_now(idle=True)
        core = MemoryCore(store, "agent-1", create=False)
        unit = core.list_units().units[0].id
        slice_id = core.list_slices(unit)[0].id
        return unit, slice_id, [m.id for m in core.read_messages(unit)]
    finally:
        store.close()


def test_every_inspector_form_refuses_another_site(tmp_path: Path) -> None:
    """Each form the inspector posts - forget messages (the slice page's picker), a
    slice, a unit, a namespace (the confirm page), log in, log out - refuses a request
    another site sends, by Origin or by Referer, even to a service without keys (whose
    pages any visitor may use): nothing is forgotten."""
    database = str(tmp_path / "m.db")
    unit, slice_id, ids = _filled(database)
    server = Server(database)
    forms = [
        ("/forget", {"ns": "agent-1", "target": "messages", "message_id": ids[:2]}),
        ("/forget", {"ns": "agent-1", "target": "messages", "message_id": ids, "confirmed": "yes"}),
        ("/forget", {"ns": "agent-1", "target": "slice", "unit": unit, "slice": slice_id,
                     "confirmed": "yes"}),
        ("/forget", {"ns": "agent-1", "target": "unit", "unit": unit, "confirmed": "yes"}),
        ("/forget", {"ns": "agent-1", "target": "namespace", "confirmed": "yes"}),
        ("/login", {"key": "pm_nothing"}),
        ("/logout", {}),
    ]  # fmt: skip
    foreign = [
        {"Origin": "http://elsewhere.example"},
        {"Origin": "null"},
        {"Origin": f"https://127.0.0.1:{server.port}.evil.example"},
        {"Referer": "http://elsewhere.example/page"},
        {},  # neither: a form always says where it comes from
    ]
    try:
        before = _held(database, unit)
        with server.client() as http:
            for path, form in forms:
                for headers in foreign:
                    answer = http.post(path, data=form, headers=headers)
                    assert answer.status_code == 403, (path, form, headers)
            assert _held(database, unit) == before  # nothing was forgotten
            same_site = http.post("/forget", data=forms[2][1], headers={"Origin": server.url})
            assert same_site.status_code == 303
        assert _held(database, unit) != before  # the same site's form does forget
    finally:
        server.stop()


def _held(database: str, unit: str) -> tuple[object, ...]:
    from partner_memory.core import MemoryCore

    store = open_store(database, read_only=True)
    try:
        core = MemoryCore(store, "agent-1", create=False)
        return (tuple(core.read_messages(unit)), tuple(core.list_slices(unit)))
    finally:
        store.close()
