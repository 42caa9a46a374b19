"""A PostgreSQL primary fails over to its streaming standby while eight writers (four
threads, four processes) record turns through a multi-host URL
(`postgresql://h1,h2/db?target_session_attrs=read-write`).

With synchronous replication no acknowledged turn is lost; with asynchronous
replication only turns acknowledged after the standby's last replayed position
may be (what the README says a failover may lose). Either way the writers go on
on the new primary by themselves, no message is stored twice, and each rolling
is in the log once and reached the durable consumer once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from partner_memory import MemoryService, RollingSettings, open_store
from partner_memory.errors import StorageUnavailableError
from partner_memory.store import MemoryStore
from partner_memory.store.contract.capabilities import RecordQuery
from tests import pg_cluster
from tests.consumer_worker import SeenRollings

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parent.parent
NAMESPACES = ("a", "b")
#: How long the writers may take to go on after the standby is promoted (s): the
#: bound of the test, asserted by waiting for every writer, not by timing one.
RESUME_S = 60


@pytest.fixture
def cluster_binaries() -> None:
    if not pg_cluster.available():
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true requires Debian's PostgreSQL server binaries")
        pytest.skip("no PostgreSQL server binaries under /usr/lib/postgresql")


class Writers:
    """Four writer threads sharing one service and four writer processes, each
    recording turns into one of two namespaces and noting when each was acknowledged."""

    def __init__(self, url: str, home: Path) -> None:
        self.acks: list[tuple[int, float, str, str]] = []  # writer, when, user id, reply id
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.stop_file = home / "stop"
        settings = RollingSettings(max_messages=6, idle_check_interval_s=0, lease_ttl_s=2)
        self.service = MemoryService(open_store(url), settings=settings, owns_store=True)
        self.service.register_consumer(SeenRollings())
        self.threads = [
            threading.Thread(target=self._write, args=(w,), daemon=True) for w in range(4)
        ]
        self.processes = [self._spawn(url, home, w) for w in range(4, 8)]
        self.readers = [
            threading.Thread(target=self._read, args=(w, p), daemon=True)
            for w, p in zip(range(4, 8), self.processes, strict=True)
        ]
        for thread in (*self.threads, *self.readers):
            thread.start()

    def _spawn(self, url: str, home: Path, writer: int) -> subprocess.Popen[str]:
        with (home / f"p{writer}.log").open("w") as log:  # its logged retries
            return subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.failover_worker",
                    url,
                    NAMESPACES[writer % 2],
                    str(self.stop_file),
                    f"p{writer}",
                ],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )

    def _note(self, writer: int, user: str, reply: str) -> None:
        with self._lock:
            self.acks.append((writer, time.monotonic(), user, reply))

    def _write(self, writer: int) -> None:
        memory = self.service.memory(NAMESPACES[writer % 2])
        n = 0
        while not self._stop.is_set():
            try:
                turn = memory.record_turn(f"t{writer} question {n}", f"t{writer} answer {n}")
            except StorageUnavailableError:
                time.sleep(0.1)
                continue
            self._note(writer, turn.user.id, turn.assistant.id)
            n += 1

    def _read(self, writer: int, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("ack "):
                _, user, reply = line.split()
                self._note(writer, user, reply)

    def acked_since(self, moment: float) -> dict[int, int]:
        with self._lock:
            counts = dict.fromkeys(range(8), 0)
            for writer, when, _, _ in self.acks:
                if when >= moment:
                    counts[writer] += 1
            return counts

    def wait(self, moment: float, each: int, timeout: float) -> bool:
        """Whether every writer acknowledged `each` turns since `moment` within `timeout`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if min(self.acked_since(moment).values()) >= each:
                return True
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        self._stop.set()
        self.stop_file.touch()
        for thread in self.threads:
            thread.join(timeout=120)
        for process in self.processes:
            process.wait(timeout=120)
        for thread in self.readers:
            thread.join(timeout=30)
        for process in self.processes:
            if process.stdout is not None:
                process.stdout.close()
        self.service.close()

    def pauses(self, moment: float) -> list[float]:
        """Each writer's wait around `moment`: its first acknowledgement after it minus
        its last before it (s)."""
        found = []
        for writer in range(8):
            times = sorted(when for w, when, _, _ in self.acks if w == writer)
            before = [t for t in times if t < moment]
            after = [t for t in times if t >= moment]
            if before and after:
                found.append(after[0] - before[-1])
        return found


@pytest.fixture
def sync_pair(cluster_binaries: None) -> Iterator[pg_cluster.Pair]:
    pair = pg_cluster.Pair(synchronous=True)
    yield pair
    pair.close()


@pytest.fixture
def async_pair(cluster_binaries: None) -> Iterator[pg_cluster.Pair]:
    pair = pg_cluster.Pair(synchronous=False)
    yield pair
    pair.close()


def _held(pair: pg_cluster.Pair) -> tuple[set[str], int]:
    """The ids the new primary holds (units and window, read at once) and how many
    message rows of units repeat an id."""
    rows = pair.standby.query(
        "SELECT 'unit', message_id FROM messages UNION ALL SELECT 'window', message_id"
        " FROM trajectory"
    )
    units = [str(i) for kind, i in rows if kind == "unit"]
    return {str(i) for _, i in rows}, len(units) - len(set(units))


def _every_rolling_once(store: MemoryStore) -> None:
    """Each namespace's rolling log runs 1..head without a gap, and the durable
    consumer recorded each of those seqs once (after catching up)."""
    service = MemoryService(store, settings=RollingSettings(idle_check_interval_s=0))
    service.register_consumer(SeenRollings())
    try:
        for namespace in NAMESPACES:
            head = store.log_head(namespace)
            assert head > 0
            seqs = [e.seq for e in store.read_log(namespace, 0, limit=1_000_000)]
            assert seqs == list(range(1, head + 1))
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                (status,) = [
                    c for c in store.consumer_status(namespace) if c.name == "seen-rollings"
                ]
                if status.position >= head:
                    break
                time.sleep(0.1)
            records = store.read_records(namespace, RecordQuery("seen-rollings", limit=1_000_000))
            assert sorted(int(r.value) for r in records) == list(range(1, head + 1))
    finally:
        service.close()


def _run(pair: pg_cluster.Pair, home: Path) -> tuple[Writers, float]:
    writers = Writers(pair.url, home)
    try:
        assert writers.wait(0, 20, timeout=120), "the writers did not start"
        promoted = time.monotonic()
        pair.fail_over()
        assert writers.wait(promoted, 10, timeout=RESUME_S), writers.acked_since(promoted)
    finally:
        writers.stop()
    return writers, promoted


def test_a_synchronous_standby_takes_over_losing_no_acknowledged_turn(
    sync_pair: pg_cluster.Pair, tmp_path: Path
) -> None:
    writers, promoted = _run(sync_pair, tmp_path)
    held, repeated = _held(sync_pair)
    acked = {i for _, _, user, reply in writers.acks for i in (user, reply)}
    assert acked - held == set()
    assert repeated == 0
    print(
        f"pauses around the failover (s): {sorted(round(p, 2) for p in writers.pauses(promoted))}"
    )
    store = open_store(sync_pair.url)
    try:
        _every_rolling_once(store)
    finally:
        store.close()


def test_an_asynchronous_standby_loses_at_most_what_it_had_not_replayed(
    async_pair: pg_cluster.Pair, tmp_path: Path
) -> None:
    writers = Writers(async_pair.url, tmp_path)
    try:
        assert writers.wait(0, 20, timeout=120), "the writers did not start"
        # what the standby has replayed: everything acknowledged before this LSN
        with writers._lock:
            replayed_acks = len(writers.acks)
        ((lsn,),) = async_pair.primary.query("SELECT pg_current_wal_lsn()::text")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ((caught_up,),) = async_pair.standby.query(
                f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn"
            )
            if caught_up:
                break
            time.sleep(0.05)
        promoted = time.monotonic()
        async_pair.fail_over()
        assert writers.wait(promoted, 10, timeout=RESUME_S), writers.acked_since(promoted)
    finally:
        writers.stop()
    held, repeated = _held(async_pair)
    before = {i for _, _, user, reply in writers.acks[:replayed_acks] for i in (user, reply)}
    assert before - held == set()
    assert repeated == 0
    lost = {i for _, _, user, reply in writers.acks for i in (user, reply)} - held
    print(f"asynchronous failover: {len(lost) // 2} acknowledged turns lost")
    store = open_store(async_pair.url)
    try:
        _every_rolling_once(store)
    finally:
        store.close()
