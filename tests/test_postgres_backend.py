"""Failure modes and sharing that belong to the PostgreSQL backend alone."""

from __future__ import annotations

import itertools
import tempfile
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

import pytest

from partner_memory.errors import ConfigurationError, StorageUnavailableError
from partner_memory.store import open_store
from partner_memory.store.contract.base import AppendOptions
from partner_memory.store.postgres.store import PostgresStore, redact
from partner_memory.testing.helpers import trim_window
from tests.tcp_proxy import TcpProxy

pytestmark = pytest.mark.postgres


def test_refused_connection_names_the_server(pg_server: str) -> None:
    with pytest.raises(StorageUnavailableError, match=r"127\.0\.0\.1:1"):
        open_store("postgresql://postgres@127.0.0.1:1/test")


def test_unknown_database(pg_server: str) -> None:
    with pytest.raises(StorageUnavailableError, match="no_such_db"):
        open_store("postgresql://postgres@127.0.0.1:5432/no_such_db")


def test_malformed_url(pg_server: str) -> None:
    with pytest.raises(ConfigurationError, match="bad PostgreSQL URL"):
        open_store("postgresql://postgres@127.0.0.1:5432/test?bogus_option=1")


def test_password_is_redacted() -> None:
    assert redact("postgresql://bob:secret@db:5432/x") == "postgresql://bob:***@db:5432/x"
    assert redact("postgresql://db/x") == "postgresql://db/x"


def test_two_stores_share_one_database(pg_url: str) -> None:
    first, second = PostgresStore(pg_url), PostgresStore(pg_url)
    try:
        first.ensure_namespace("ns", "u")
        second.set_session("ns", "v")
        assert first.get_namespace("ns").memory_session_id == "v"  # type: ignore[union-attr]
    finally:
        first.close()
        second.close()


def test_a_bad_url_setting_is_configuration_not_an_outage(pg_server: str) -> None:
    from partner_memory.errors import ConfigurationError

    separator = "&" if "?" in pg_server else "?"
    with pytest.raises(ConfigurationError, match="sslmode"):
        open_store(f"{pg_server}{separator}sslmode=bogus")


def _proxied(pg_url: str) -> tuple[TcpProxy, str]:
    """A proxy in front of the server, and `pg_url` through it."""
    parts = urlsplit(pg_url)
    proxy = TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    netloc = (
        f"{parts.username}@127.0.0.1:{proxy.port}" if parts.username else f"127.0.0.1:{proxy.port}"
    )
    return proxy, urlunsplit(parts._replace(netloc=netloc))


def test_calls_right_after_a_restart_succeed_and_write_once(pg_url: str) -> None:
    """Pooled connections an outage killed are not handed to the caller's failure: one
    found dead before the server answered anything is replaced and its transaction sent
    again - never doubled - whether it sat idle or was used a moment before."""
    import time

    from partner_memory.core import MemoryCore
    from partner_memory.model import Message

    proxy, url = _proxied(pg_url)
    store = open_store(url)
    try:
        core = MemoryCore(store, "ns")
        for round_ in range(4):
            core.update_memory_unit([Message(role="user", content=f"before {round_}")], "s")
            proxy.cut()  # the server went away and came back: every pooled connection is dead
            if round_ % 2:
                time.sleep(1.5)  # and sat idle since
            core.update_memory_unit([Message(role="user", content=f"after {round_}")], "s")
            assert core.list_units().units[0].message_count == 2 * (round_ + 1)
    finally:
        store.close()
        proxy.close()


def test_a_turn_right_after_a_restart_is_recorded_once(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A turn is one statement of its own (no BEGIN): one sent on a connection the outage
    killed is found not stored and sent again, once."""
    import logging

    from partner_memory.memory import PartnerMemory

    caplog.set_level(logging.INFO, logger="partner_memory.store.postgres.replay")
    proxy, url = _proxied(pg_url)
    store = open_store(url)
    memory = PartnerMemory(store, "ns")
    memory.wait()  # the recall indexer's first catch-up has read the log: only turns follow
    try:
        for round_ in range(3):
            memory.record_turn(f"before {round_}", "ok")
            proxy.cut()
            memory.record_turn(f"after {round_}", "ok")
        contents = _contents(store, "ns")
        assert len(contents) == 12
        assert [c.split()[-2:] for c in contents[::2]] == [
            [when, str(r)] for r in range(3) for when in ("before", "after")
        ]
        resent = [r for r in caplog.records if "sending the statement again" in r.message]
        assert len(resent) == 3  # each first turn after a cut met a dead connection
    finally:
        memory.close()
        store.close()
        proxy.close()


def test_refused_writes_leave_the_connection_usable(pg_url: str) -> None:
    """The server skips the rest of a pipeline after a refused statement, whatever psycopg
    meant to prepare there included: refusals at every point of psycopg's preparing
    threshold leave each statement working on the store's one connection."""
    from partner_memory.errors import InvalidInputError, NotFoundError
    from partner_memory.memory import PartnerMemory
    from partner_memory.testing.helpers import messages

    store = PostgresStore(pg_url, min_connections=1, max_connections=1)
    memory = PartnerMemory(store, "ns")
    try:
        for round_ in range(12):
            with pytest.raises(NotFoundError):
                store.append_trajectory("nope", messages(1), AppendOptions(last_interaction=round_))
            turn = memory.record_turn(f"question {round_}", "answer")
            with pytest.raises(InvalidInputError):
                store.append_trajectory("ns", [turn.user])
            assert store.append_trajectory("ns", messages(1, f"m{round_}")).length == 3 * (
                round_ + 1
            )
    finally:
        memory.close()
        store.close()


def test_a_turn_behind_the_callers_does_not_wait_for_the_wal_flush(pg_url: str) -> None:
    """The one statement of a turn turns synchronous_commit off for its own transaction
    when no caller waits for it, and leaves the connection's setting alone."""
    import psycopg

    from partner_memory.memory import PartnerMemory
    from partner_memory.store.postgres.store import _APPEND_WINDOW
    from partner_memory.store.sql.durability import behind_the_caller

    store = PostgresStore(pg_url, min_connections=1, max_connections=1)
    memory = PartnerMemory(store, "ns")
    try:
        memory.record_turn("first", "awaited")
        before = store.commit_counts
        with behind_the_caller():
            memory.record_turn("second", "behind")
        after = store.commit_counts
        assert (after.commits - before.commits, after.syncs - before.syncs) == (1, 0)
        assert len(_contents(store, "ns")) == 4
        with psycopg.connect(pg_url) as conn:  # not autocommit: the call's transaction stays
            row = conn.execute(
                _APPEND_WINDOW, ("ns", [], [], [], [], [], [], None, False, -1, True)
            ).fetchone()
            assert row == (4, None)
            assert conn.execute("SHOW synchronous_commit").fetchone() == ("off",)
            conn.rollback()
            assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
    finally:
        memory.close()
        store.close()


def test_a_stalled_connection_fails_at_the_deadline(pg_url: str) -> None:
    """A server that stops answering fails the call at the deadline instead of hanging it."""
    import time
    from urllib.parse import urlsplit, urlunsplit

    from partner_memory.core import MemoryCore
    from partner_memory.model import Message

    parts = urlsplit(pg_url)
    proxy = TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    netloc = (
        f"{parts.username}@127.0.0.1:{proxy.port}" if parts.username else f"127.0.0.1:{proxy.port}"
    )
    store = PostgresStore(urlunsplit(parts._replace(netloc=netloc)), transaction_deadline=1.0)
    try:
        core = MemoryCore(store, "ns")
        core.update_memory_unit([Message(role="user", content="before")], "s")
        proxy.stall()
        started = time.monotonic()
        with pytest.raises(StorageUnavailableError, match="did not answer within 1s"):
            core.update_memory_unit([Message(role="user", content="stalled")], "s")
        assert time.monotonic() - started < 30  # not for ever
        proxy.resume()
        assert core.get_unit_info(core.unit_ids()[0]).message_count == 1  # nothing half-written
        core.update_memory_unit([Message(role="user", content="after")], "s")
    finally:
        proxy.resume()
        store.close()
        proxy.close()


def test_a_long_transaction_that_is_answered_is_not_dropped(pg_url: str) -> None:
    """The deadline is for a server that stops answering: a transaction of many answered
    statements (a reindex of a million messages) may run longer than it."""
    import time

    store = PostgresStore(pg_url, transaction_deadline=1.0)
    try:
        started = time.monotonic()
        with store._transaction(write=False) as cur:
            while time.monotonic() - started < 2.5:
                assert store._run(cur, "SELECT pg_sleep(0.3)").fetchone() is not None
        stalled = pytest.raises(StorageUnavailableError, match="did not answer within 1s")
        with stalled, store._transaction(write=False) as cur:
            store._run(cur, "SELECT pg_sleep(1.6)").fetchone()
        time.sleep(1.0)  # the server's side ends its sleep: no snapshot is left held open
    finally:
        store.close()


def test_queries_are_never_jit_compiled(pg_url: str) -> None:
    """Without statistics every plan looks expensive; compiling it took ~20 ms per lookup
    of a few rows (a rolling's stored-id check at 1M messages: 33 ms instead of 0.5)."""
    store = PostgresStore(pg_url)
    try:
        with store._transaction(write=False) as cur:
            assert store._run(cur, "SHOW jit").fetchone()[0] == "off"
    finally:
        store.close()


def test_the_window_table_does_not_grow_with_history(pg_url: str) -> None:
    """Rolled window rows are reclaimed now and then, even with autovacuum off, so the
    table (and every count of a window) stays the size of the live windows."""
    from partner_memory.store.postgres.store import RECLAIM_AFTER
    from tests.helpers import messages

    store = PostgresStore(pg_url)
    try:
        store.ensure_namespace("ns", "u")

        def size() -> int:
            with store._transaction(write=False) as cur:
                return int(store._run(cur, "SELECT pg_relation_size('trajectory')").fetchone()[0])

        for i in range(4 * RECLAIM_AFTER // 100):
            batch = messages(100, f"turn{i}")
            store.append_trajectory("ns", batch)
            trim_window(store, "ns", [m.id for m in batch])
        # 20,000 rows of ~100 bytes would take ~2.5 MB; reclaimed, ~5,000 rows at most
        assert size() < 1_200_000
    finally:
        store.close()


def test_the_transaction_deadline_comes_from_the_environment(pg_url: str) -> None:
    from partner_memory.errors import ConfigurationError
    from partner_memory.settings import StoreSettings

    settings = StoreSettings.from_env({"PARTNER_MEMORY_PG_DEADLINE": "2.5"})
    store = settings.open(pg_url)
    try:
        assert store._watchdog.deadline == 2.5  # type: ignore[attr-defined]
    finally:
        store.close()
    for bad in ("0", "-1", "soon", "inf"):
        with pytest.raises(ConfigurationError, match="PARTNER_MEMORY_PG_DEADLINE"):
            StoreSettings.from_env({"PARTNER_MEMORY_PG_DEADLINE": bad})


def test_connections_carry_keepalives_and_the_servers_idle_transaction_limit(
    pg_url: str,
) -> None:
    """Beside the watchdog: the kernel finds a vanished peer (keepalives, TCP user
    timeout) and the server ends a transaction its client left idle for the deadline."""
    store = PostgresStore(pg_url, transaction_deadline=12.5)
    try:
        with store._pool.connection() as conn:
            parameters = conn.info.get_parameters()
            (limit,) = conn.execute("SHOW idle_in_transaction_session_timeout").fetchone() or ("",)
            conn.rollback()
        assert parameters["keepalives"] == "1"
        assert parameters["tcp_user_timeout"] == "12500"
        assert limit == "12500ms"
    finally:
        store.close()


def _traced(store: PostgresStore, work: Callable[[], object]) -> list[str]:
    """The libpq protocol trace of the store's one connection during `work`."""
    import psycopg

    with tempfile.TemporaryFile("w+") as trace:
        with store._pool.connection() as conn:
            conn.pgconn.trace(trace.fileno())
            conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        work()
        with store._pool.connection() as conn:
            conn.pgconn.untrace()
        trace.seek(0)
        return trace.read().splitlines()


def _round_trips(store: PostgresStore, work: Callable[[], object]) -> int:
    """How many times the store's one connection waited for the server during `work`
    (each run of client messages answered by the server)."""
    senders = [line[0] for line in _traced(store, work) if line[:1] in ("F", "B")]
    return sum(
        1 for sent, answered in itertools.pairwise(senders) if (sent, answered) == ("F", "B")
    )


def test_a_turn_takes_one_round_trip_and_a_write_two(pg_url: str) -> None:
    from partner_memory.memory import PartnerMemory
    from partner_memory.store.contract.capabilities import StoredItem

    store = PostgresStore(pg_url, min_connections=1, max_connections=1)
    memory = PartnerMemory(store, "ns")
    try:
        memory.record_turn("hello", "hi")  # the namespace exists from here on
        # its statements, the COMMIT and the window's length after it, in one flight
        assert _round_trips(store, lambda: memory.record_turn("how are you?", "fine")) == 1
        assert _round_trips(store, lambda: store.set_session("ns", "s2")) == 2  # no read
        assert _round_trips(store, lambda: store.put_item(StoredItem("i/", "k", "{}", 1, 1))) <= 3
        assert memory.trajectory.snapshot()[-1].content.endswith("fine")
    finally:
        memory.close()
        store.close()


def test_work_behind_the_callers_does_not_wait_for_the_wal_flush(pg_url: str) -> None:
    """Its COMMIT goes with `SET LOCAL synchronous_commit TO off`, in the same round
    trip; a write a caller waits for keeps the server's setting."""
    from partner_memory.store.sql.durability import behind_the_caller

    store = PostgresStore(pg_url, min_connections=1, max_connections=1)
    try:
        store.ensure_namespace("ns", "s1")
        before = store.commit_counts

        def behind() -> None:
            with behind_the_caller():
                store.set_session("ns", "s2")

        lines = _traced(store, behind)
        relaxed = [n for n, line in enumerate(lines) if "synchronous_commit" in line]
        commits = [n for n, line in enumerate(lines) if '"COMMIT"' in line]
        assert relaxed, lines
        assert commits, lines
        assert relaxed[0] < commits[0], lines
        assert _round_trips(store, behind) == 2
        awaited = _traced(store, lambda: store.set_session("ns", "s3"))
        assert not any("synchronous_commit" in line for line in awaited)
        after = store.commit_counts
        assert (after.commits - before.commits, after.syncs - before.syncs) == (3, 1)
        assert store.ensure_namespace("ns", "other").memory_session_id == "s3"
    finally:
        store.close()


def _contents(store: object, namespace: str) -> list[str]:
    return [m.content for m in store.load_trajectory(namespace).messages]  # type: ignore[attr-defined]


def _turn_cut_in_flight(
    pg_url: str,
    question: str,
    hold: Callable[[TcpProxy], None],
    until: Callable[[list[str]], bool],
) -> None:
    """A turn (after a first one) sent through a proxy that `hold` stalls, whose connection
    is cut once `until` holds of the window as the server has it: the turn returns, and
    is stored exactly once."""
    from partner_memory.memory import PartnerMemory

    proxy, url = _proxied(pg_url)
    store, direct = open_store(url), open_store(pg_url)
    memory = PartnerMemory(store, "ns")
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(memory.record_turn(question, "an answer"))
        except Exception as exc:
            outcome.append(exc)

    try:
        memory.record_turn("hello", "hi")
        hold(proxy)
        thread = threading.Thread(target=run)
        thread.start()
        deadline = time.monotonic() + 60
        while not until(_contents(direct, "ns")):
            assert time.monotonic() < deadline, "the turn never got where it is cut"
            time.sleep(0.01)
        proxy.cut()
        proxy.resume()
        thread.join(60)
        assert len(outcome) == 1, "the turn did not return"
        assert not isinstance(outcome[0], Exception), outcome
        contents = _contents(direct, "ns")
        assert sum(c.endswith(question) for c in contents) == 1
        assert len(contents) == 4
    finally:
        proxy.resume()
        memory.close()
        store.close()
        direct.close()
        proxy.close()


def test_a_turn_whose_connection_dies_as_it_commits_is_stored_once(pg_url: str) -> None:
    """The server committed the turn, but its answer never came back: the store asks on
    another connection, finds the turn stored and does not send it again; the caller gets
    its answer, the window's length read again."""
    question = "did it commit?"
    _turn_cut_in_flight(
        pg_url,
        question,
        TcpProxy.stall_answers,
        lambda window: any(c.endswith(question) for c in window),
    )


def test_a_turn_whose_connection_dies_before_the_server_has_it_is_sent_again(
    pg_url: str,
) -> None:
    """Nothing reached the server: the store finds the turn not stored and sends it again."""
    began = time.monotonic()
    _turn_cut_in_flight(
        pg_url,
        "sent again?",
        TcpProxy.stall,
        # the turn is sent into the stalled proxy meanwhile (or finds it cut): never stored
        lambda window: len(window) == 2 and time.monotonic() - began > 0.2,
    )
