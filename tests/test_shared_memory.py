"""One memory, many processes: real OS processes record into one namespace (R9-R16 shared).

Four workers record turns on a shared wall-clock schedule of conversations
separated by quiet gaps, exit and restart every few dozen turns (or are
SIGKILLed at random), while count and idle rollings run in whichever process
triggers them. Afterwards every acknowledged message must be stored exactly
once, in each worker's recording order, slices must tile their units, and
each quiet-separated conversation must be one unit.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from partner_memory import MemoryCore, MemoryService, RollingSettings, open_store
from partner_memory.model import Message
from partner_memory.store import MemoryStore
from tests.helpers import raw_sql

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 4
PHASES = 3
PHASE_S = 2.5
GAP_S = 7.0  # the idle time plus room for the idle rolling on a loaded machine


def _spawn(plan: dict[str, object], worker: int, acks: Path) -> subprocess.Popen[bytes]:
    first_seq = len(acks.read_text(encoding="utf-8").splitlines()) if acks.exists() else 0
    child = dict(plan, worker=worker, first_seq=first_seq, acks=str(acks))
    with acks.with_suffix(".err").open("ab") as errors:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.service_worker", json.dumps(child)],
            cwd=ROOT,
            stderr=errors,
        )


def _errors(acks: Path) -> str:
    return acks.with_suffix(".err").read_text(encoding="utf-8", errors="replace")[-3000:]


def _run_schedule(store_url: str, tmp_path: Path, *, kill: bool) -> dict[str, object]:
    start = time.time() + 2.0  # every worker is up before the first conversation
    plan: dict[str, object] = {
        "db": store_url,
        "namespace": "shared",
        "max_messages": 24,
        "idle_after_ms": 2500,  # many times a worker's stall under load, so no false split
        "idle_check_s": 0.1,
        "lease_ttl_s": 1.5,
        "start": start,
        "phase_s": PHASE_S,
        "gap_s": GAP_S,
        "phases": PHASES,
        "turns_per_life": 30,  # plus 7 per worker, so restarts are staggered
        "pause_s": 0.03,
    }
    end = start + PHASES * (PHASE_S + GAP_S)
    acks = [tmp_path / f"acks-{w}.txt" for w in range(WORKERS)]
    procs = [_spawn(plan, w, acks[w]) for w in range(WORKERS)]
    rng = random.Random(7)
    next_kill = time.time() + rng.uniform(0.5, 1.5)
    kills = restarts = 0
    while time.time() < end:
        time.sleep(0.02)
        if kill and time.time() >= next_kill:
            victim = rng.randrange(WORKERS)
            procs[victim].send_signal(signal.SIGKILL)
            procs[victim].wait()
            kills += 1
            procs[victim] = _spawn(plan, victim, acks[victim])
            next_kill = time.time() + rng.uniform(0.3, 1.2)
        for w, proc in enumerate(procs):
            code = proc.poll()
            if code is None:
                continue
            assert code == 0, _errors(acks[w])
            if time.time() < end - 0.5:
                procs[w] = _spawn(plan, w, acks[w])
                restarts += 1
    for w, proc in enumerate(procs):
        assert proc.wait(60) == 0, _errors(acks[w])
    evidence = tmp_path / "held-twice.json"
    return {
        "acks": acks,
        "start": start,
        "kills": kills,
        "restarts": restarts,
        "evidence": str(evidence),
    }


def _phase(message: Message, start: float) -> int:
    assert message.timestamp is not None  # ms, truncated: judge by the middle of the gap
    return int((message.timestamp / 1000 - start + GAP_S / 2) // (PHASE_S + GAP_S))


def _held_twice(store: MemoryStore, evidence: Path) -> None:
    """Before the final flush: a message both in a unit and in the window must be one a
    count rolling kept (R12: the newest share of its snapshot stays in the window, stored
    already) with no idle rolling since. Anything else is dumped to `evidence`, with the
    rolling log, the lease and the activity row, and fails."""
    from partner_memory.trajectory import kept_count

    window = [m.id for m in store.load_trajectory("shared").messages]
    both = store.stored_message_ids("shared", window)
    if not both:
        return
    rollings = raw_sql(
        store,
        "SELECT r.seq, r.idle, r.rolling_size, r.retain_divisor, r.messages, r.holder"
        " FROM rollings r JOIN namespaces n ON n.id = r.namespace_id"
        " WHERE n.name = 'shared' ORDER BY r.seq DESC LIMIT 6",
    )
    activity = raw_sql(
        store,
        "SELECT a.last_interaction, a.idle_rolled_for FROM activity a"
        " JOIN namespaces n ON n.id = a.namespace_id WHERE n.name = 'shared'",
    )
    leases = raw_sql(store, "SELECT * FROM rolling_leases")
    _, idle, size, divisor, _, _ = rollings[0]
    retained = (
        not idle
        and divisor is not None
        and set(window[: len(both)]) == both
        and len(both) <= kept_count(int(size), int(divisor))
        and activity[0][1] != activity[0][0]  # no idle rolling for the last interaction
    )
    found = {
        "both": sorted(both),
        "window": window,
        "rollings (newest first)": rollings,
        "activity (last_interaction, idle_rolled_for)": activity,
        "leases": leases,
        "retained by the newest count rolling": retained,
    }
    evidence.write_text(json.dumps(found, indent=1, default=str), encoding="utf-8")
    assert retained, f"held in a unit and in the window: {json.dumps(found, default=str)}"


def _check(store_url: str, run: dict[str, object]) -> None:
    start = float(run["start"])  # type: ignore[arg-type]
    store = open_store(store_url)
    try:
        _held_twice(store, Path(str(run["evidence"])))
        settings = RollingSettings(lease_ttl_s=1.5, idle_check_interval_s=0)
        with MemoryService(store, settings=settings) as service:
            memory = service.memory("shared")
            memory.roll_now(idle=True)  # whatever a killed worker left in the window
            assert len(memory.trajectory) == 0
        core = MemoryCore(store, "shared", create=False)
        stored: list[Message] = []
        phases_of_units: list[set[int]] = []
        for unit_id in core.unit_ids():
            info = core.get_unit_info(unit_id)
            messages = core.read_messages(unit_id)
            assert len(messages) == info.message_count
            position = 0
            for s in sorted(core.list_slices(unit_id), key=lambda s: s.start_index):
                assert s.start_index == position, "slices must tile their unit"
                position = s.end_index
            assert position == info.message_count
            stored += messages
            phases_of_units.append({_phase(m, start) for m in messages})
        ids = [m.id for m in stored]
        assert len(ids) == len(set(ids)), "a message was stored twice"
        acked: set[str] = set()
        for path in run["acks"]:  # type: ignore[attr-defined]
            for line in Path(path).read_text(encoding="utf-8").splitlines():
                user_id, assistant_id, _ = line.split()
                acked.update((user_id, assistant_id))
        missing = acked - set(ids)
        assert not missing, f"{len(missing)} acknowledged messages were lost"
        order: dict[str, list[int]] = defaultdict(list)
        for m in stored:
            worker, seq = m.content.split("\n\n", 1)[1].split()[:2]
            order[worker].append(int(seq))
        for worker, seqs in order.items():
            assert seqs == sorted(seqs), f"{worker}'s messages are out of recording order"
        # one unit per quiet-separated conversation
        assert all(len(p) == 1 for p in phases_of_units), phases_of_units
        spoken = [next(iter(p)) for p in phases_of_units]
        assert spoken == sorted(set(spoken)), f"a conversation was split: {spoken}"
        assert len(spoken) == PHASES
        totals = core.rolling_stats()
        assert totals.rollings > PHASES  # count rollings happened, not just idle ones
        by_kind: dict[int, set[str]] = defaultdict(set)
        for idle, holder in raw_sql(store, "SELECT idle, holder FROM rollings"):
            by_kind[int(idle)].add(str(holder).rsplit(":", 1)[0])  # host:pid
        assert len(by_kind[0]) >= 2, "count rollings should happen in several processes"
        # the idle rollings that split the conversations (checked above) leave a log row
        # only when the window held messages not yet stored: after a count rolling, the
        # window keeps only stored messages, so an idle rolling then logs nothing
    finally:
        store.close()


@pytest.mark.slow
def test_four_processes_share_one_memory(store_url: str, tmp_path: Path) -> None:
    """R9-R16 across processes: restarts every few dozen turns lose and double nothing."""
    run = _run_schedule(store_url, tmp_path, kill=False)
    assert int(run["restarts"]) >= WORKERS  # type: ignore[call-overload]
    _check(store_url, run)


@pytest.mark.slow
def test_four_processes_with_random_sigkills(store_url: str, tmp_path: Path) -> None:
    """SIGKILLed workers: every acknowledged message is still stored exactly once, in order."""
    run = _run_schedule(store_url, tmp_path, kill=True)
    assert int(run["kills"]) >= 5  # type: ignore[call-overload]
    _check(store_url, run)
    acks: list[Path] = run["acks"]  # type: ignore[assignment]
    acknowledged = sum(len(path.read_text().splitlines()) for path in acks)
    print(f"figures: {run['kills']} kills, {acknowledged} acknowledged, 0 lost, 0 doubled")


def test_two_memories_rolling_at_once_store_nothing_twice(store_url: str) -> None:
    """R15 across services: two memories on one namespace roll the window once."""
    import threading

    from partner_memory.rolling import UsageMeter

    class Slow:
        name = "slow"

        def summarize(self, messages: object, meter: UsageMeter) -> str:
            time.sleep(0.5)
            return "slow summary"

    store = open_store(store_url)
    settings = RollingSettings(idle_check_interval_s=0)
    try:
        first = MemoryService(store, settings=settings, summarizers=[Slow()])
        second = MemoryService(store, settings=settings, summarizers=[Slow()])
        a, b = first.memory("ns"), second.memory("ns")
        for i in range(30):
            a.record_turn(f"q{i}", f"a{i}")
        assert len(b.trajectory) == 60  # one window, whichever handle reads it
        results: list[object] = []
        threads = [
            threading.Thread(target=lambda m=m: results.append(m.roll_now())) for m in (a, b)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stored = [m.id for u in a.core.unit_ids() for m in a.core.read_messages(u)]
        assert len(stored) == len(set(stored)) == 60
        assert sum(r is not None for r in results) == 1
        assert len(b.context()) == 1  # the other handle sees the rolling's summary
        first.close()
        second.close()
    finally:
        store.close()


def test_dead_holder_lease_is_taken_over(store_url: str) -> None:
    """A lease left by a killed process does not block rolling until it expires."""
    store = open_store(store_url)
    try:
        core = MemoryCore(store, "ns")
        code = (
            "import sys, os, socket; from partner_memory import open_store\n"
            "from partner_memory.rolling.lease import process_space\n"
            "s = open_store(sys.argv[1])\n"
            "holder = f'{socket.gethostname()}:{os.getpid()}:{process_space()}:x'\n"
            "assert s.begin_rolling('ns', holder, ttl_ms=3_600_000) is not None\n"
            "os._exit(0)\n"
        )
        subprocess.run([sys.executable, "-c", code, store_url], check=True, cwd=ROOT)
        assert store.rolling_holder("ns") is not None
        settings = RollingSettings(idle_check_interval_s=0, lease_ttl_s=3600)
        with MemoryService(store, settings=settings) as service:
            memory = service.memory("ns")
            memory.record_turn("hello", "hi")
            started = time.monotonic()
            assert memory.roll_now() is not None
            assert time.monotonic() - started < 30
        assert core.unit_ids()
    finally:
        store.close()


def test_turns_recorded_elsewhere_are_seen(store_url: str) -> None:
    """A handle opened before another process records still sees the shared window."""
    store = open_store(store_url)
    try:
        with MemoryService(store, settings=RollingSettings(idle_check_interval_s=0)) as svc:
            memory = svc.memory("ns")
            code = (
                "import sys; from partner_memory import PartnerMemory, open_store\n"
                "m = PartnerMemory(open_store(sys.argv[1]), 'ns', idle_timer=False)\n"
                "m.record_turn('from elsewhere', 'noted'); m.close()\n"
            )
            subprocess.run([sys.executable, "-c", code, store_url], check=True, cwd=ROOT)
            assert [m.content.split("\n\n")[1] for m in memory.trajectory.snapshot()] == [
                "from elsewhere",
                "noted",
            ]
            assert memory.trajectory.last_interaction is not None
    finally:
        store.close()
