"""Replaying transcripts: LoCoMo conversations and JSON Lines, resumable after a crash."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from partner_memory.errors import InvalidInputError
from partner_memory.ingest import ReplayClock, ingest, read_transcript
from partner_memory.ingest.transcripts import parse_locomo_date
from partner_memory.memory import PartnerMemory
from partner_memory.store import MemoryStore, open_store
from partner_memory.store.contract.base import UnitQuery
from tests.helpers import LOCOMO_DIR, assert_unit_consistent, needs_locomo

ROOT = Path(__file__).parent.parent
CONV = LOCOMO_DIR / "conv-30.json"
MINI = Path(__file__).parent / "data" / "locomo-mini.json"  # our own text, LoCoMo's format


def test_locomo_format_reader_and_sessions(sqlite_store: MemoryStore) -> None:
    """Each turn a message with speaker, dia_id and session; sessions become units."""
    transcript = read_transcript(MINI)
    first = transcript.messages[0]
    assert (first.role, first.metadata) == (
        "user",
        {"speaker": "Ana", "dia_id": "D1:1", "session": 1},
    )
    assert first.content.startswith("[Ana]:\n\nMorning Ben!")
    assert transcript.messages[1].role == "assistant"
    assert "[shares an image: a photo of a pottery wheel]" in transcript.messages[2].content
    assert first.timestamp == parse_locomo_date("9:15 am on 3 March, 2024")
    clock = ReplayClock()
    with PartnerMemory(sqlite_store, "mini", clock=clock, idle_timer=False) as memory:
        ingest(memory, transcript, clock)
        stored = all_stored(memory)
    assert [ids for _, ids in stored] == [
        ["D1:1", "D1:2", "D1:3", "D1:4"],
        ["D2:1", "D2:2", "D2:3"],
        ["D3:1", "D3:2", "D3:3", "D3:4"],
    ]
    with pytest.raises(InvalidInputError, match="session date"):
        parse_locomo_date("yesterday")


def all_stored(memory: PartnerMemory) -> list[tuple[str, list[str]]]:
    """(unit id, dia_ids) for every unit, oldest unit first."""
    units = reversed(memory.core.list_units(limit=1000).units)
    return [(u.id, [m.metadata["dia_id"] for m in memory.core.read_messages(u.id)]) for u in units]


@needs_locomo
def test_locomo_replay_one_unit_per_session(store: MemoryStore) -> None:
    """Sessions days apart become one unit each; slices cover every turn once; dia_ids survive."""
    transcript = read_transcript(CONV)
    sessions = Counter(m.metadata["session"] for m in transcript.messages)
    clock = ReplayClock()
    with PartnerMemory(store, "conv-30", clock=clock, idle_timer=False) as memory:
        report = ingest(memory, transcript, clock)
        stored = all_stored(memory)
        assert report.recorded == len(transcript.messages) == 369
        assert len(stored) == len(sessions) == report.units == 19
        assert [len(ids) for _, ids in stored] == [sessions[k] for k in sorted(sessions)]
        flat = [dia for _, ids in stored for dia in ids]
        assert flat == [m.metadata["dia_id"] for m in transcript.messages]
        for unit_id, ids in stored:
            assert_unit_consistent(memory.core, unit_id)
            slices = memory.core.list_slices(unit_id)
            assert sum(len(s) for s in slices) == len(ids)
            session = int(ids[0].split(":")[0][1:])
            date = parse_locomo_date(json.loads(CONV.read_text())[f"session_{session}_date_time"])
            assert all(0 <= s.timestamp - date < 2 * 3_600_000 for s in slices)
        assert len(memory.trajectory) == 0


def test_long_session_rolls_by_count(sqlite_store: MemoryStore, tmp_path: Path) -> None:
    """A session longer than 72 messages is cut by the count trigger, kept sixth and all."""
    lines = [
        json.dumps(
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"message {i}",
                "timestamp": 1_700_000_000_000 + i * 1000,
            }
        )
        for i in range(200)
    ]
    path = tmp_path / "long.jsonl"
    path.write_text("\n".join(lines), "utf-8")
    clock = ReplayClock()
    with PartnerMemory(sqlite_store, "long", clock=clock, idle_timer=False) as memory:
        report = ingest(memory, read_transcript(path), clock)
        (unit_id,) = memory.core.unit_ids()
        contents = [m.content for m in memory.core.read_messages(unit_id)]
        assert contents == [f"message {i}" for i in range(200)]
        slices = memory.core.list_slices(unit_id)
        assert len(slices[0]) == 72
        assert report.totals.rollings == len(slices) >= 3


def test_jsonl_errors_are_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"role": "user", "content": "ok"}\n{"role": "robot", "content": "x"}\n')
    with pytest.raises(InvalidInputError, match=r"bad\.jsonl line 2: role"):
        read_transcript(path)
    path.write_text('{"role": "user"}\n')
    with pytest.raises(InvalidInputError, match="content"):
        read_transcript(path)
    path.write_text('{"role": "user", "content": "x", "timestamp": "last tuesday"}\n')
    with pytest.raises(InvalidInputError, match="ISO"):
        read_transcript(path)
    with pytest.raises(InvalidInputError, match="does not exist"):
        read_transcript(tmp_path / "missing.jsonl")


def _ingest_cmd(database: str, transcript: Path, namespace: str = "replay") -> list[str]:
    return [
        sys.executable,
        "-m",
        "partner_memory",
        "ingest",
        str(transcript),
        "--db",
        database,
        "--namespace",
        namespace,
        "--json",
    ]


def _stored_dia_ids(store_url: str, namespace: str) -> tuple[list[str], list[str]]:
    flat, window, _ = _stored_units(store_url, namespace)
    return flat, window


def _stored_units(store_url: str, namespace: str) -> tuple[list[str], list[str], list[set[str]]]:
    """Stored dia ids, window dia ids, and the sessions ("D3") each unit holds."""
    store = open_store(store_url)
    try:
        if store.get_namespace(namespace) is None:
            return [], [], []
        with PartnerMemory(store, namespace, idle_timer=False, create=False) as memory:
            units = all_stored(memory)
            flat = [dia for _, ids in units for dia in ids]
            window = [m.metadata["dia_id"] for m in memory.trajectory.snapshot()]
        return flat, window, [{dia.split(":")[0] for dia in ids} for _, ids in units]
    finally:
        store.close()


@needs_locomo
@pytest.mark.slow
def test_sigkill_during_ingest_then_rerun(store_url: str, tmp_path: Path) -> None:
    """Ingest killed at random points and run again: nothing lost or doubled, same units."""
    # small replay groups, so that kills land between groups and not only before the first
    env = dict(
        os.environ, PYTHONPATH=str(ROOT / "src"), PARTNER_MEMORY_ROLLING_REPLAY_GROUP_MESSAGES="40"
    )
    conv = LOCOMO_DIR / "conv-43.json"
    expected = sorted(m.metadata["dia_id"] for m in read_transcript(conv).messages)
    rng = random.Random(26)
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "partner_memory", "--help"], env=env, capture_output=True, check=True
    )
    startup = time.monotonic() - started
    started = time.monotonic()
    subprocess.run(
        _ingest_cmd(store_url, conv, "probe"),  # the backend's own start-up counts too
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=True,
    )
    work = max(0.05, time.monotonic() - started - startup)
    partial, rounds = 0, int(os.environ.get("PARTNER_MEMORY_CRASH_KILLS", "12")) // 2
    for round_ in range(rounds * 3):
        if round_ >= rounds and partial:
            break  # extra rounds only until one kill has landed mid-ingest
        namespace = f"replay-{round_}"
        with subprocess.Popen(
            _ingest_cmd(store_url, conv, namespace),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ) as child:
            time.sleep(startup + rng.uniform(0.0, 1.0) * work)
            child.send_signal(signal.SIGKILL)
            child.wait()
        flat, window = _stored_dia_ids(store_url, namespace)
        assert len(flat) == len(set(flat))  # nothing stored twice, even mid-way
        partial += 0 < len(set(flat) | set(window)) < len(expected)
        done = subprocess.run(
            _ingest_cmd(store_url, conv, namespace),
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(done.stdout)["transcripts"][0]["message_count"] == len(expected)
        flat, window, sessions = _stored_units(store_url, namespace)
        assert window == []
        assert sorted(flat) == expected  # nothing lost, nothing twice
        # the units of an uninterrupted run: one per session, none merged
        assert all(len(held) == 1 for held in sessions), sessions
        assert len(sessions) == len({dia.split(":")[0] for dia in expected})
    assert partial  # at least one kill landed mid-ingest


def test_same_name_different_content_is_not_skipped(
    sqlite_store: MemoryStore, tmp_path: Path
) -> None:
    """Ids come from the conversation, not the file name: Tuesday's chat.jsonl is recorded."""
    from partner_memory.ingest import ReplayClock, ingest

    for day, words in (("monday", "hello"), ("tuesday", "goodbye")):
        folder = tmp_path / day
        folder.mkdir()
        (folder / "chat.jsonl").write_text(
            f'{{"role": "user", "content": "{words}"}}\n'
            f'{{"role": "assistant", "content": "{words} to you"}}\n'
        )
    clock = ReplayClock()
    with PartnerMemory(sqlite_store, "ns", clock=clock, idle_timer=False) as memory:
        first = ingest(memory, read_transcript(tmp_path / "monday" / "chat.jsonl"), clock)
        second = ingest(memory, read_transcript(tmp_path / "tuesday" / "chat.jsonl"), clock)
        again = ingest(memory, read_transcript(tmp_path / "tuesday" / "chat.jsonl"), clock)
    assert (first.recorded, second.recorded, again.recorded, again.skipped) == (2, 2, 0, 2)


def test_reused_or_conflicting_ids_name_the_line(sqlite_store: MemoryStore, tmp_path: Path) -> None:
    from partner_memory.ingest import ReplayClock, ingest

    path = tmp_path / "chat.jsonl"
    path.write_text(
        '{"role": "user", "content": "a", "id": "m-1"}\n'
        '{"role": "user", "content": "b", "id": "m-2"}\n'
        '{"role": "user", "content": "c", "id": "m-1"}\n'
    )
    with pytest.raises(InvalidInputError, match=r"chat\.jsonl line 3: message id 'm-1' repeats"):
        read_transcript(path)
    path.write_text('{"role": "user", "content": "a", "id": "m-1"}\n')
    clock = ReplayClock()
    with PartnerMemory(sqlite_store, "ns", clock=clock, idle_timer=False) as memory:
        ingest(memory, read_transcript(path), clock)
        path.write_text('{"role": "user", "content": "not a", "id": "m-1"}\n')
        with pytest.raises(InvalidInputError, match=r"line 1: message id 'm-1' is already stored"):
            ingest(memory, read_transcript(path), clock)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (b"\xff\xfe not utf-8\n", "not UTF-8"),
        (b'{"role": "user", "content": "x", "timestamp": NaN}\n', "not a time"),
        (b'{"role": "user", "content": "x", "timestamp": 1e300}\n', "not a time"),
        (b'{"role": "user", "content": "x", "timestamp": 100000000000000000000}\n', "between 1970"),
        (b"[" * 100_000 + b"\n", "nested too deeply"),
        (b'{"role": "user", "content": "x", "id": ["list"]}\n', "'id' must be a string"),
        (b'{"role": "user", "content": "x\\ud800"}\n', "content is not valid Unicode text"),
        (
            b'{"role": "user", "content": "x", "metadata": {"a": "\\udfff"}}\n',
            "metadata is not valid Unicode text",
        ),
    ],
)
def test_hostile_jsonl_is_one_clear_error(tmp_path: Path, text: bytes, problem: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(text)
    with pytest.raises(InvalidInputError, match=problem) as caught:
        read_transcript(path)
    assert str(caught.value).count("bad.jsonl") == 1


@pytest.mark.parametrize(
    "document",
    [
        {"conversation": [1, 2]},
        {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1": 5,
            "session_1_date_time": "1:56 pm on 8 May, 2023",
        },
        {"speaker_a": "A", "speaker_b": "B", "session_1": [], "session_1_date_time": 20230508},
        {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1": [{"speaker": "A", "text": 3}],
            "session_1_date_time": "1:56 pm on 8 May, 2023",
        },
        {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1": [
                {"speaker": "A", "text": "x", "dia_id": "D1"},
                {"speaker": "B", "text": "y", "dia_id": "D1"},
            ],
            "session_1_date_time": "1:56 pm on 8 May, 2023",
        },
        {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1": [{"speaker": "A", "text": "x", "dia_id": "D1:\ud800"}],
            "session_1_date_time": "1:56 pm on 8 May, 2023",
        },
    ],
)
def test_locomo_of_the_wrong_shape_is_one_clear_error(tmp_path: Path, document: object) -> None:
    import json

    path = tmp_path / "conv.json"
    path.write_text(json.dumps(document))
    with pytest.raises(InvalidInputError, match=r"conv\.json"):
        read_transcript(path)


def test_replay_rolls_where_live_would_whatever_the_summariser_speed(
    store: MemoryStore, tmp_path: Path
) -> None:
    """A slow summariser gives the same slices as an instant one: 72, then 60 each."""
    import json
    import time

    from partner_memory.ingest import ReplayClock, ingest
    from partner_memory.rolling import UsageMeter

    class Slow:
        name = "slow"

        def summarize(self, messages: object, meter: UsageMeter) -> str:
            time.sleep(0.05)
            return "slowly summarised"

    path = tmp_path / "long.jsonl"
    start = 1_700_000_000_000
    path.write_text(
        "".join(
            json.dumps(
                {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"m{i}",
                    "timestamp": start + i * 1000,
                }
            )
            + "\n"
            for i in range(400)
        )
    )
    sizes = {}
    for name, summarizers in (("instant", None), ("slow", [Slow()])):
        clock = ReplayClock()
        with PartnerMemory(
            store, name, clock=clock, idle_timer=False, summarizers=summarizers
        ) as memory:
            ingest(memory, read_transcript(path), clock, flush=False)
            (unit,) = memory.core.unit_ids()
            sizes[name] = [len(s) for s in memory.core.list_slices(unit)]
    assert sizes["slow"] == sizes["instant"] == [72] + [60] * 5


def test_resume_with_two_conversations_in_the_window_splits_them(
    store: MemoryStore, tmp_path: Path
) -> None:
    """Killed while an idle rolling was in flight: the re-run gives one unit per conversation."""
    import json

    from partner_memory.ingest import ReplayClock, ingest

    hour = 3_600_000
    lines = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"c{c} m{i}",
            "timestamp": 1_700_000_000_000 + c * 3 * hour + i * 1000,
        }
        for c in range(2)
        for i in range(6)
    ]
    path = tmp_path / "two.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    transcript = read_transcript(path)
    clock = ReplayClock()
    with PartnerMemory(store, "ns", clock=clock, idle_timer=False) as memory:
        # what a killed run leaves: the first conversation and the start of the next
        memory.record_messages(transcript.messages[:8], interaction=lines[7]["timestamp"])  # type: ignore[arg-type]
        ingest(memory, transcript, clock)
        units = [
            {m.content.split()[0] for m in memory.core.read_messages(u)}
            for u in memory.core.unit_ids()
        ]
    assert units == [{"c0"}, {"c1"}]


def _memory_shape(store: MemoryStore, namespace: str) -> list[object]:
    """Everything a replay decides, without the ids and times it makes up itself."""
    shape: list[object] = []
    for info in reversed(store.list_units(namespace, UnitQuery(limit=1000))):
        ids = [m.id for m in store.read_messages(namespace, info.id, 0, info.message_count)]
        slices = store.read_slices(namespace, info.id)
        shape.append((ids, [(s.start_index, s.end_index, s.summary, s.timestamp) for s in slices]))
    log = store.read_log(namespace, 0, limit=1000)
    shape.append([(e.seq, e.idle, e.rolling_size, e.retain_divisor) for e in log])
    shape.append([m.id for m in store.load_trajectory(namespace).messages])
    return shape


def test_grouped_replay_writes_what_live_recording_writes(store: MemoryStore) -> None:
    """A replay plans rollings in memory and writes them in groups; live recording of the
    same messages one interaction at a time, rolling in the background, stores the same."""
    hour = 3_600_000
    rng = random.Random(7)
    start, messages = 1_700_000_000_000, []
    for conversation in range(6):
        at = start + conversation * 5 * hour
        for i in range(rng.choice([1, 2, 30, 71, 72, 73, 150])):
            at += rng.choice([1000, 60_000, 20 * 60_000])
            messages.append(
                {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"c{conversation} {i}",
                    "timestamp": at,
                }
            )
    from partner_memory.ingest.transcripts import parse_transcript

    transcript = parse_transcript(
        "".join(json.dumps(m) + "\n" for m in messages), "mixed.jsonl", "jsonl"
    )
    clock = ReplayClock()
    with PartnerMemory(store, "replayed", clock=clock, idle_timer=False) as memory:
        ingest(memory, transcript, clock, flush=False)
    live_clock = ReplayClock()
    with PartnerMemory(store, "live", clock=live_clock, idle_timer=False) as memory:
        for message in transcript.messages:
            assert message.timestamp is not None
            live_clock.set(message.timestamp)
            memory.check_idle()  # the scheduler's check, as the quiet ends
            memory.wait()
            memory.record_messages([message], interaction=live_clock())  # now, as live
            memory.wait()
    replayed, live = _memory_shape(store, "replayed"), _memory_shape(store, "live")
    assert replayed == live
    *units, log, window = replayed
    assert len(units) >= 3
    assert {idle for _, idle, _, _ in log} == {True, False}  # both triggers took part
    assert window  # and what is left unrolled is the same


def test_replay_beside_a_live_agent_loses_and_doubles_nothing(
    store: MemoryStore, tmp_path: Path
) -> None:
    """A replay's groups hold the lease only while they write; an agent recording turns in
    the same namespace meanwhile keeps every turn, and no message is stored twice."""
    import threading

    path = tmp_path / "long.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"replayed {i}",
                    "timestamp": 1_700_000_000_000 + i * 1000,
                }
            )
            + "\n"
            for i in range(3000)
        )
    )
    transcript = read_transcript(path)
    turns: list[str] = []

    def agent() -> None:
        with PartnerMemory(store, "shared", idle_timer=False) as memory:
            for i in range(150):
                turn = memory.record_turn(f"live {i}", f"reply {i}")
                turns.extend([turn.user.id, turn.assistant.id])

    clock = ReplayClock()
    with PartnerMemory(store, "shared", clock=clock, idle_timer=False) as memory:
        live = threading.Thread(target=agent)
        live.start()
        ingest(memory, transcript, clock, flush=False)
        live.join()
        memory.wait()
        stored = [m.id for u in memory.core.unit_ids() for m in memory.core.read_messages(u)]
        window = [m.id for m in memory.trajectory.snapshot()]
    assert len(stored) == len(set(stored))  # nothing twice (the window keeps a rolled tail)
    assert len(window) == len(set(window))
    assert set(stored) | set(window) == {m.id for m in transcript.messages} | set(turns)


def test_a_unit_is_dated_by_its_last_message(tmp_path: Path) -> None:
    """A conversation at 09:00-09:14 makes a unit dated 09:14, not when the idle timer
    would have fired (10:14): replayed and live alike."""
    from partner_memory import MemoryCore

    database = str(tmp_path / "memory.db")
    clock = ReplayClock()
    store = open_store(database)
    with PartnerMemory(store, "mei", clock=clock) as memory:
        ingest(memory, read_transcript(ROOT / "examples" / "conversation.jsonl"), clock)
        core = MemoryCore(store, "mei", create=False)
        units = core.list_units().units
        assert len(units) == 2
        for info in units:
            said = [m.timestamp for m in core.read_messages(info.id) if m.timestamp is not None]
            assert info.timestamp == max(said)
            assert all(s.timestamp == max(said) for s in core.list_slices(info.id))

    now = [1_700_000_000_000]
    with PartnerMemory(store, "live", clock=lambda: now[0], idle_timer=False) as memory:
        memory.record_turn("I'm off to Kyoto in April", "Noted")
        last = max(w.message.timestamp or 0 for w in memory.window())
        now[0] += 2 * 3_600_000  # the idle rolling runs two hours later
        assert memory.roll_now(idle=True) is not None
        assert MemoryCore(store, "live", create=False).list_units().units[0].timestamp == last
    store.close()
