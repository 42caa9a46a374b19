"""The PostgreSQL store behind PgBouncer in transaction pooling mode (Debian's
`pgbouncer`, started here): the shipped contract and several `serve` processes
work with `PARTNER_MEMORY_PG_POOLER=transaction`, no session state reaches another
client, and without the setting the store says which one to use."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from partner_memory.client import MemoryClient
from partner_memory.errors import ConfigurationError
from partner_memory.settings import StoreSettings
from partner_memory.store import MemoryStore, open_store
from partner_memory.testing import StoreContract
from tests import pgbouncer
from tests.http_server import Server

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def bouncer(pg_server: str) -> Iterator[pgbouncer.Bouncer]:
    if not pgbouncer.available():
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true requires Debian's pgbouncer (.ci/run installs it)")
        pytest.skip("Debian's pgbouncer is not installed (apt-get install pgbouncer)")
    started = pgbouncer.Bouncer(pg_server)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def bounced_database(pg_server: str) -> Iterator[str]:
    """A database of the module's own (PgBouncer passes no search_path), dropped after."""
    name = f"pm_bounce_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield name
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def database(pg_server: str, bounced_database: str) -> str:
    """That database, emptied for each test (straight on the server, not through the
    pooler): every test starts on a database without memory in it."""
    direct = urlunsplit(urlsplit(pg_server)._replace(path=f"/{bounced_database}"))
    with psycopg.connect(direct, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
    return bounced_database


class TestThroughPgBouncer(StoreContract):
    """The shipped suite with every transaction handed to any server connection."""

    @pytest.fixture
    def store(self, bouncer: pgbouncer.Bouncer, database: str) -> Iterator[MemoryStore]:
        opened = open_store(bouncer.url(database), pg_pooler="transaction")
        yield opened
        opened.close()


def _settings(url: str) -> tuple[str, str]:
    with psycopg.connect(url, autocommit=True) as conn:
        jit = conn.execute("SHOW jit").fetchone()
        idle = conn.execute("SHOW idle_in_transaction_session_timeout").fetchone()
    assert jit is not None
    assert idle is not None
    return str(jit[0]), str(idle[0])


def test_no_session_state_reaches_other_clients(
    bouncer: pgbouncer.Bouncer, database: str, pg_server: str
) -> None:
    url = bouncer.url(database)
    store = open_store(url, pg_pooler="transaction")
    try:
        store.ensure_namespace("ns", "session")
        for n in range(20):  # past psycopg's threshold for preparing a statement
            assert store.get_namespace("ns") is not None
            store.set_session("ns", f"session-{n}")
        assert _settings(url) == _settings(pg_server)
    finally:
        store.close()


def test_without_the_setting_the_store_says_which_to_use(
    bouncer: pgbouncer.Bouncer, database: str
) -> None:
    url = bouncer.url(database)
    store = open_store(url)
    holder = psycopg.connect(url, autocommit=True)
    try:
        store.ensure_namespace("ns", "session")
        for _ in range(10):  # psycopg prepares the statement on its server connection...
            store.get_namespace("ns")
        holder.execute("BEGIN")  # ...which another client now holds (a transaction open)
        holder.execute("SELECT 1").fetchone()
        # so the store's next transaction runs on another server, which never saw it
        with pytest.raises(ConfigurationError, match="PARTNER_MEMORY_PG_POOLER=transaction"):
            store.get_namespace("ns")
    finally:
        holder.close()
        store.close()


def test_a_bad_pooler_setting_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="PARTNER_MEMORY_PG_POOLER"):
        StoreSettings.from_env({"PARTNER_MEMORY_PG_POOLER": "statement"})
    assert StoreSettings.from_env({"PARTNER_MEMORY_PG_POOLER": "session"}).pg_pooler == "none"


def test_several_serves_through_pgbouncer(
    bouncer: pgbouncer.Bouncer, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARTNER_MEMORY_PG_POOLER", "transaction")
    servers = [Server(bouncer.url(database)) for _ in range(2)]
    errors: list[BaseException] = []
    turns, writers = 15, 4

    def write(worker: int) -> None:
        try:
            for n in range(turns):
                server = servers[(worker + n) % len(servers)]
                with MemoryClient(server.url, f"agent-{worker % 2}") as memory:
                    memory.record_turn(f"worker {worker} turn {n}", f"noted {worker}.{n}")
        except BaseException as exc:  # reported below
            errors.append(exc)

    try:
        threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        with MemoryClient(servers[0].url, "agent-0") as first:
            first.roll_now(idle=True)
            assert first.stats().messages == turns * 2 * writers // 2
        with MemoryClient(servers[1].url, "agent-1") as second:
            second.roll_now(idle=True)
            assert second.stats().messages == turns * 2 * writers // 2
    finally:
        for server in servers:
            server.stop()
