"""Fixtures: real SQLite files and a fresh schema on the real PostgreSQL server.

PostgreSQL tests use PARTNER_MEMORY_TEST_PG (default: the local server's
`test` database). Without a reachable server they skip with the reason, except
under CI=true, where a missing server fails the run instead of hiding tests.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from partner_memory.recall.analysis_worker import close_workers
from partner_memory.store import MemoryStore
from partner_memory.store.sqlite import SQLiteStore

PG_URL = os.environ.get("PARTNER_MEMORY_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


class FakeClock:
    """A clock the test moves by hand; every read advances 1 ms so times stay distinct."""

    def __init__(self, start: int = 1_700_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        self.now += 1
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


class ManualClock:
    """A clock that only moves when the test says so."""

    def __init__(self, start: int = 1_700_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@pytest.fixture(autouse=True)
def _no_analysis_worker_between_tests() -> Iterator[None]:
    """A process starts an analysis worker once its bulk work adds up; each test starts
    from none, so what one test ingested never hands another's rows to a worker."""
    yield
    close_workers()


@pytest.fixture(scope="session", autouse=True)
def _recall_indexes_in_the_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """PostgreSQL's recall indexes go under the user's cache: this run's own, so tests
    (and the processes they start) never leave indexes in the home directory."""
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if before is None:
        del os.environ["XDG_CACHE_HOME"]
    else:
        os.environ["XDG_CACHE_HOME"] = before


def _pg_unavailable_reason() -> str | None:
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install '.[postgres]')"
    try:
        psycopg.connect(PG_URL, connect_timeout=3).close()
    except psycopg.Error as exc:
        return f"PostgreSQL at {PG_URL} is not reachable: {str(exc).strip()}"
    return None


@pytest.fixture(scope="session")
def pg_server() -> str:
    reason = _pg_unavailable_reason()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true requires PostgreSQL: {reason}")
        pytest.skip(reason)
    return PG_URL


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """A URL whose connections use a schema of their own, dropped afterwards."""
    import psycopg

    schema = f"pm_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in pg_server else "?"
    yield f"{pg_server}{separator}options={quote(f'-csearch_path={schema}')}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each test of a store runs on every backend: SQLite and PostgreSQL, and the
    in-process reference backend unless it needs a URL another process could open."""
    if "backend" in metafunc.fixturenames:
        kinds = ["sqlite", "postgres"]
        if "store_url" not in metafunc.fixturenames:
            kinds.append("memory")
        metafunc.parametrize("backend", kinds)


@pytest.fixture
def store_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database setting for each backend, as a user would write it."""
    if backend == "sqlite":
        return str(tmp_path / "memory.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def backend_url(backend: str, request: pytest.FixtureRequest) -> str:
    """A database setting for each backend, the in-process reference one included."""
    if backend == "memory":
        return f"memory://test-{uuid.uuid4().hex}"
    return str(request.getfixturevalue("store_url"))


@pytest.fixture
def store(backend_url: str, request: pytest.FixtureRequest) -> Iterator[MemoryStore]:
    """The store of each backend; a `capability` mark skips backends that lack it."""
    from partner_memory.store import open_store

    opened = open_store(backend_url)
    marker = request.node.get_closest_marker("capability")
    if marker is not None and marker.args[0] not in opened.capabilities:
        opened.close()
        pytest.skip(f"{type(opened).__name__} lacks the {marker.args[0]} capability")
    yield opened
    opened.close()


@pytest.fixture
def sql_store(store_url: str) -> Iterator[MemoryStore]:
    """The store of each SQL backend, for what only SQL has (plans, transactions' code)."""
    from partner_memory.store import open_store

    opened = open_store(store_url)
    yield opened
    opened.close()


@pytest.fixture
def sqlite_store(sqlite_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(sqlite_path)
    yield opened
    opened.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def manual_clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def fake_llm() -> Iterator[Any]:
    """A chat-completions server on 127.0.0.1, scripted by the test."""
    from tests.llm_server import FakeLLM

    server = FakeLLM().start()
    yield server
    server.stop()


@pytest.fixture
def model(fake_llm: Any) -> Any:
    """The local model of a framework adapter's test: it answers "answer N" and keeps
    what each request showed it (`tests.frameworks.Model`)."""
    from tests.frameworks import Model

    fake_llm.respond = Model()
    return fake_llm.respond
