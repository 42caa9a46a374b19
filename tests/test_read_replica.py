"""Listings read from a read replica (`PARTNER_MEMORY_PG_READ_URL`, `serve
--pg-read-url`): a standby the test starts and whose replay it pauses, so a stale
answer shows where a read went. A process reads its own writes: until the replica
has replayed them (within `READ_YOUR_WRITES_S`) its reads go to the primary."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import httpx
import pytest

from partner_memory.queries import MemoryQueries
from partner_memory.settings import StoreSettings
from partner_memory.store import open_store
from tests import pg_cluster
from tests.http_server import Server

pytestmark = pytest.mark.postgres


@pytest.fixture
def pair() -> Iterator[pg_cluster.Pair]:
    if not pg_cluster.available():
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true requires Debian's PostgreSQL server binaries")
        pytest.skip("no PostgreSQL server binaries under /usr/lib/postgresql")
    started = pg_cluster.Pair(synchronous=False)
    yield started
    started.close()


def _paused(pair: pg_cluster.Pair, paused: bool) -> None:
    pair.standby.query(f"SELECT pg_wal_replay_{'pause' if paused else 'resume'}()")


def _caught_up(pair: pg_cluster.Pair) -> None:
    ((lsn,),) = pair.primary.query("SELECT pg_current_wal_flush_lsn()::text")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ((done,),) = pair.standby.query(f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn")
        if done:
            return
        time.sleep(0.02)
    raise AssertionError("the standby did not catch up")


def _names(queries: MemoryQueries) -> set[str]:
    return {n.name for n in queries.namespaces(limit=100)}


def test_listings_come_from_the_replica_and_a_process_reads_its_own_writes(
    pair: pg_cluster.Pair,
) -> None:
    other = open_store(pair.primary.url)  # another process's store, on the primary alone
    ours = open_store(pair.primary.url, pg_read_url=pair.standby.url)
    queries = MemoryQueries(ours)
    try:
        _caught_up(pair)  # the schema the stores made
        _paused(pair, True)
        other.ensure_namespace("theirs", "session")
        assert "theirs" not in _names(queries)  # the replica has not replayed it
        assert queries.namespace("theirs") is not None  # what callers decide from: primary
        ours.ensure_namespace("mine", "session")
        assert {"mine", "theirs"} <= _names(queries)  # ours: read from the primary meanwhile
        _paused(pair, False)
        _caught_up(pair)
        assert {"mine", "theirs"} <= _names(queries)  # the replica has them now
        _paused(pair, True)
        other.ensure_namespace("later", "session")
        assert "later" not in _names(queries)  # back on the replica: nothing of ours pending
    finally:
        _paused(pair, False)
        ours.close()
        other.close()


def test_the_setting_and_serve_take_the_read_url(pair: pg_cluster.Pair) -> None:
    settings = StoreSettings.from_env({"PARTNER_MEMORY_PG_READ_URL": pair.standby.url})
    assert settings.pg_read_url == pair.standby.url
    server = Server(pair.primary.url, "--pg-read-url", pair.standby.url)
    try:
        _caught_up(pair)
        _paused(pair, True)
        other = open_store(pair.primary.url)
        try:
            other.ensure_namespace("unseen", "session")
        finally:
            other.close()
        listed = httpx.get(f"{server.url}/v1/namespaces", timeout=30).json()
        assert "unseen" not in {n["namespace"] for n in listed["namespaces"]}
        _paused(pair, False)
        _caught_up(pair)
        listed = httpx.get(f"{server.url}/v1/namespaces", timeout=30).json()
        assert "unseen" in {n["namespace"] for n in listed["namespaces"]}
    finally:
        _paused(pair, False)
        server.stop()
