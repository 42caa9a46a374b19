"""The rolling log and its consumers: durable ones see every rolling exactly once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from partner_memory import (
    LogEntry,
    MemoryService,
    Message,
    PartnerMemory,
    Record,
    RollingResult,
    RollingSettings,
    open_store,
)
from partner_memory.rolling.consumers import PreparedWork, PreparingConsumer
from partner_memory.rolling.follow import LogFollower
from partner_memory.store import MemoryStore, Staged
from partner_memory.store.contract.base import AppendOptions
from partner_memory.store.contract.capabilities import RecordQuery
from partner_memory.store.sql.log import LogSql
from partner_memory.testing.helpers import messages, rolling
from tests.consumer_worker import SeenRollings
from tests.helpers import Collecting

ROOT = Path(__file__).resolve().parent.parent
KILLS = int(os.environ.get("PARTNER_MEMORY_CONSUMER_KILLS", "110"))


def _seen(store: MemoryStore) -> list[tuple[str, int]]:
    found = store.read_records("ns", RecordQuery("seen-rollings", limit=1_000_000))
    return [("ns", int(r.value)) for r in found]


@pytest.mark.slow
def test_durable_consumer_killed_at_random_sees_every_rolling_once(store_url: str) -> None:
    """Killed at random points (100+ times), then restarted: each rolling processed once."""
    rng = random.Random(11)
    kills = 0
    store = open_store(store_url)
    try:
        while kills < KILLS:
            before = store.log_head("ns")
            child = subprocess.Popen(
                [sys.executable, "-m", "tests.consumer_worker", store_url, "100000"],
                cwd=ROOT,
                stdout=subprocess.PIPE,
            )
            assert child.stdout is not None
            assert child.stdout.readline().strip() == b"ready"
            # each kill lands while this child is rolling, however slow the machine is
            while store.log_head("ns") == before:
                assert child.poll() is None, "the worker died before it made a rolling"
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.25))
            child.send_signal(signal.SIGKILL)
            child.wait()
            child.stdout.close()
            kills += 1
        with MemoryService(store, settings=RollingSettings(idle_check_interval_s=0)) as service:
            service.register_consumer(SeenRollings()).result(60)
        head = store.log_head("ns")
        assert head >= KILLS, head  # rollings were being made while the kills landed
        seen = _seen(store)
        assert sorted(seen) == [("ns", seq) for seq in range(1, head + 1)]
        (status,) = [c for c in store.consumer_status("ns") if c.name == "seen-rollings"]
        assert (status.durable, status.position) == (True, head)
        print(f"figures: {kills} kills, {head} rollings, each processed once")
    finally:
        store.close()


def test_durable_consumer_catches_up_and_carries_the_rolling(store: MemoryStore) -> None:
    """A consumer registered late processes the log from its start, with the same data."""
    settings = RollingSettings(idle_check_interval_s=0)
    with MemoryService(store, settings=settings) as service:
        memory = service.memory("agent")
        memory.record_turn("I'm off to Kyoto in April.", "Book early.")
        first = memory.roll_now()
        assert first is not None
        consumer = Collecting()
        service.register_consumer(consumer).result(10)
        memory.record_turn("No seafood for me.", "Noted.")
        memory.record_turn("Are you there?", "NO_REPLY")
        second = memory.roll_now()
        assert second is not None
        memory.wait()
    assert [e.seq for e in consumer.entries] == [1, 2]
    again = RollingResult.from_log(consumer.entries[1])
    assert again.memory_slice == second.memory_slice
    assert again.increment_messages == second.increment_messages
    assert again.memory_unit.id == second.memory_unit.id
    assert (again.rolling_size, again.retain_divisor, again.idle) == (4, 6, False)


def test_failing_durable_consumer_stays_put_and_is_reported(store: MemoryStore) -> None:
    """A failure rolls its writes back, keeps its position, and shows in stats with the reason."""
    settings = RollingSettings(idle_check_interval_s=0)
    consumer = Collecting()
    consumer.fail = True
    with MemoryService(store, settings=settings) as service:
        service.register_consumer(consumer).result(10)
        memory = service.memory("agent")
        memory.record_turn("hello", "hi")
        memory.roll_now()
        memory.wait()
        (status,) = [c for c in memory.stats().consumers if c.name == "collecting"]
        assert (status.position, status.head, status.failures) == (0, 1, 1)
        assert status.last_error == "RuntimeError: index is down"
        consumer.fail = False
        service.catch_up()
        (status,) = [c for c in memory.stats().consumers if c.name == "collecting"]
        assert (status.position, status.failures) == (1, 1)
    assert [e.seq for e in consumer.entries] == [1]


def test_in_memory_consumer_failures_are_counted_in_the_store(store: MemoryStore) -> None:
    """In-memory consumers' failures are kept bounded and reach every process's stats."""

    def broken(result: RollingResult) -> None:
        raise ValueError("consumer bug " + "x" * 2000)

    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        memory.register_after_rolling(broken)
        for _ in range(3):
            memory.record_turn("a", "b")
            memory.roll_now()
        memory.wait()
    with PartnerMemory(store, "agent", idle_timer=False) as reopened:
        (status,) = [c for c in reopened.stats().consumers if c.name.endswith("broken")]
    assert (status.durable, status.failures) == (False, 3)
    assert status.last_error is not None
    assert status.last_error.startswith("ValueError: consumer bug")
    assert len(status.last_error) <= 500


def test_two_services_share_one_consumer_without_repeats(store: MemoryStore) -> None:
    """The same durable consumer in two services processes each rolling once between them."""
    settings = RollingSettings(idle_check_interval_s=0)
    one, two = Collecting(), Collecting()
    with MemoryService(store, settings=settings) as a, MemoryService(store, settings=settings) as b:
        a.register_consumer(one).result(10)
        b.register_consumer(two).result(10)
        for i in range(6):
            handle = (a if i % 2 else b).memory("agent")
            handle.record_turn(f"q{i}", f"a{i}")
            handle.roll_now()
        a.catch_up()
        b.catch_up()
    assert sorted(e.seq for e in one.entries + two.entries) == list(range(1, 7))


def test_cli_stats_shows_consumers(store_url: str) -> None:
    """`stats` (table and JSON) shows each consumer's position and last failure."""
    import json

    from typer.testing import CliRunner

    from partner_memory.cli import app

    store = open_store(store_url)
    consumer = Collecting()
    consumer.fail = True
    with MemoryService(store, settings=RollingSettings(idle_check_interval_s=0)) as service:
        service.register_consumer(consumer).result(10)
        memory = service.memory("agent")
        memory.record_turn("hello", "hi")
        memory.roll_now()
        memory.wait()
    store.close()
    runner = CliRunner()
    shown = runner.invoke(app, ["stats", "--db", store_url, "-n", "agent"])
    assert shown.exit_code == 0, shown.output
    assert "collecting" in shown.output
    assert "index is down" in shown.output
    as_json = runner.invoke(app, ["stats", "--db", store_url, "-n", "agent", "--json"])
    (status,) = [
        c
        for c in json.loads(as_json.output)["rolling_totals"]["consumers"]
        if c["name"] == "collecting"
    ]
    assert status["name"] == "collecting"
    assert (status["position"], status["head"], status["failure_count"]) == (0, 1, 1)


class Preparing:
    """Records each rolling; `prepare` makes its text after a write of its own, which
    could not happen inside the consumer's write transaction (it would wait for itself)."""

    name = "preparing"

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.made: list[int] = []
        self.work = PreparedWork(self._make)

    def _make(self, entry: LogEntry) -> str:
        self.made.append(entry.seq)
        return entry.slice.summary.upper()

    def prepare(self, entries: Sequence[LogEntry]) -> None:
        for entry in entries:  # a write of its own
            self.store.ensure_namespace(f"prepared-{entry.seq}", "s")
        self.work.prepare(entries)

    def apply(self, entry: LogEntry) -> Sequence[Staged]:
        return [Record(str(entry.seq), self.work.take(entry))]


def test_slow_work_is_prepared_outside_the_transaction(store: MemoryStore) -> None:
    settings = RollingSettings(idle_check_interval_s=0)
    consumer = Preparing(store)
    assert isinstance(consumer, PreparingConsumer)
    with MemoryService(store, settings=settings) as service:
        memory = service.memory("agent")
        for turn in range(3):
            memory.record_turn(f"question {turn} about Kyoto", "an answer")
            memory.roll_now()
        service.register_consumer(consumer).result(10)
    rows = [
        (int(r.key), str(r.value)) for r in store.read_records("agent", RecordQuery("preparing"))
    ]
    summaries = {e.seq: e.slice.summary.upper() for e in store.read_log("agent", 0, limit=10)}
    assert sorted(rows) == sorted(summaries.items())
    assert sorted(consumer.made) == sorted(summaries)  # made once each, before the transaction


def test_prepared_work_is_made_again_for_a_rolling_that_changed(store: MemoryStore) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        memory.record_turn("I moved to Porto", "Nice")
        memory.roll_now()
    (entry,) = store.read_log("agent", 0, limit=1)
    made: list[str] = []

    def make(e: LogEntry) -> str:
        made.append(e.messages[0].content)
        return e.messages[0].content

    work = PreparedWork(make)
    work.prepare([entry])
    forgotten = replace(
        entry, messages=(replace(entry.messages[0], content=""), *entry.messages[1:])
    )
    assert work.take(forgotten) == ""  # not the prepared text of before the forget
    work.prepare([entry])
    said = entry.messages[0].content
    assert said.endswith("I moved to Porto")
    assert work.take(entry) == said
    assert made == [said, "", said]


class Entries:
    """A preparing consumer that keeps the entries it was handed."""

    name = "entries"
    lookahead = 100

    def __init__(self) -> None:
        self.entries: list[LogEntry] = []

    def prepare(self, entries: Sequence[LogEntry]) -> None:
        del entries

    def apply(self, entry: LogEntry) -> Sequence[Staged]:
        self.entries.append(entry)
        return []


def test_a_follower_takes_what_its_process_committed_without_reading_it_back(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process that committed a rolling hands its followers the entry from memory,
    with the values the log gives; a tuple in the metadata (read back as a list) makes
    that rolling read from the log."""
    if not isinstance(store, LogSql):
        pytest.skip("the in-memory store keeps no log to read back")
    read_back: list[int] = []
    read_log = LogSql._read_log

    def counted(self: LogSql, *args: Any) -> list[LogEntry]:
        found = read_log(self, *args)
        read_back.extend(e.seq for e in found)
        return found

    store.ensure_namespace("ns", "s")
    follower = Entries()
    rounds = LogFollower(store)
    tagged = Message("user", "tagged", metadata={"tags": ("a", "b")})
    for said in (messages(2, "a"), [tagged], messages(2, "b")):
        store.append_trajectory("ns", said, AppendOptions(last_interaction=1_000))
        assert store.begin_rolling("ns", "h", ttl_ms=60_000) is not None
        done = store.commit_rolling("ns", rolling("h", said, drop=[m.id for m in said]))
        rounds.committed("ns", [done])
        monkeypatch.setattr(LogSql, "_read_log", counted)
        while rounds.round(
            "entries", "ns", follower.apply, batch=10, prepare=follower.prepare, lookahead=10
        ):
            pass
        monkeypatch.setattr(LogSql, "_read_log", read_log)
    assert follower.entries == store.read_log("ns", 0, limit=10)
    assert [e.seq for e in follower.entries] == [1, 2, 3]
    assert follower.entries[1].messages[0].metadata == {"tags": ["a", "b"]}
    assert read_back == [2]


def test_a_forget_after_the_commit_reaches_the_consumer(store: MemoryStore) -> None:
    """Rollings kept for this process's consumers are not handed on once a forget has
    changed them: the consumer gets the log as it is now."""
    consumer = Entries()
    with MemoryService(store, settings=RollingSettings(idle_check_interval_s=0)) as service:
        memory = service.memory("agent")
        asked = [
            memory.record_turn(f"question {t} about Kyoto", "an answer").user for t in range(3)
        ]
        for _ in range(3):
            memory.record_turn("and then?", "more")
            memory.roll_now()
        memory.wait()
        assert memory.forget_messages([asked[0].id]) == 1
        service.register_consumer(consumer).result(10)
        memory.wait()
    assert consumer.entries == store.read_log("agent", 0, limit=10)
    assert [e.seq for e in consumer.entries] == [1, 2, 3]
    assert "Kyoto" not in consumer.entries[0].messages[0].content
