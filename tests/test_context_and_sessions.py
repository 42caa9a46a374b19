"""One context and one session boundary per namespace, whichever process asks or records.

The context is derived from the database: reads never change it, every process
and every restart renders the same XML, the newest summary is the snapshot. A
quiet gap longer than the idle time is a memory session's end even when no
process ran through it. What was recorded comes back as `text`, beside its
speaker and markers.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from partner_memory import Domain, Message, PartnerMemory, RollingSettings
from partner_memory.ingest import ReplayClock, ingest
from partner_memory.ingest.transcripts import Transcript
from partner_memory.store import MemoryStore, open_store
from tests.conftest import ManualClock

HOUR = 3_600_000
DAY = 24 * HOUR
NO_TIMER = RollingSettings(idle_check_interval_s=0)


def _opened(url: str, namespace: str, clock: ManualClock) -> PartnerMemory:
    return PartnerMemory(
        open_store(url), namespace, clock=clock, settings=NO_TIMER, owns_store=True
    )


def _session(memory: PartnerMemory, clock: ManualClock, day: str, turns: int = 2) -> None:
    for i in range(turns):
        memory.record_turn(f"On {day} we talk about {day}-topic {i}", f"Noted for {day}")
        clock.advance(1000)
    memory.roll_now(idle=True)
    clock.advance(DAY)


def _days(memory: PartnerMemory, clock: ManualClock) -> None:
    for day in ("Monday", "Tuesday", "Wednesday", "Thursday"):
        _session(memory, clock, day)


def test_the_newest_summary_is_the_snapshot_however_often_it_is_read(
    store: MemoryStore, manual_clock: ManualClock
) -> None:
    """After four rollings and many reads, the snapshot is the newest; older ones follow
    newest first, each a level lower; reading changes nothing."""
    with PartnerMemory(store, "agent", clock=manual_clock, settings=NO_TIMER) as memory:
        _days(memory, manual_clock)
        first = memory.context_xml()
        for _ in range(8):
            manual_clock.advance(30_000)
            assert memory.context_xml() == first
        (block,) = memory.context()
        assert "Thursday" in block.snapshot
        assert [d for h in block.history for d in ("Wednesday", "Tuesday", "Monday") if d in h] == [
            "Wednesday",
            "Tuesday",
            "Monday",
        ]
        assert block.score == 100


def test_a_restart_and_another_process_render_the_same_context(
    store_url: str, manual_clock: ManualClock
) -> None:
    """Reopening changes nothing, and a second OS process renders identical XML."""
    with _opened(store_url, "agent", manual_clock) as memory:
        _days(memory, manual_clock)
        here = memory.context_xml()
    with _opened(store_url, "agent", manual_clock) as reopened:
        assert reopened.context_xml() == here
    elsewhere = subprocess.run(
        [sys.executable, "-m", "partner_memory", "context", "--db", store_url, "-n", "agent"],
        capture_output=True,
        text=True,
        check=True,
        stdin=subprocess.DEVNULL,
    ).stdout
    assert elsewhere.rstrip("\n") == here


def test_forgetting_one_message_changes_only_the_block_that_held_it(
    store: MemoryStore, manual_clock: ManualClock
) -> None:
    """A forget re-summarises the slice that held the message; the other summaries keep
    their text and places, and nothing older comes back."""
    with PartnerMemory(store, "agent", clock=manual_clock, settings=NO_TIMER) as memory:
        for day in ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday"):
            _session(memory, manual_clock, day)
        before = memory.context()[0]
        assert "Sunday" not in before.snapshot + "".join(before.history)  # six rollings, five kept
        tuesday = memory.recall("Tuesday-topic", k=1, activate=False).hits[0].message
        memory.forget_messages([tuesday.id])
        after = memory.context()[0]
        texts_before = [before.snapshot, *before.history]
        texts_after = [after.snapshot, *after.history]
        assert len(texts_after) == len(texts_before)
        changed = [
            i for i, (a, b) in enumerate(zip(texts_before, texts_after, strict=False)) if a != b
        ]
        assert len(changed) == 1
        assert "Tuesday" in texts_before[changed[0]]
        assert "Tuesday-topic 0" not in texts_after[changed[0]]
        assert "Sunday" not in "".join(texts_after)


def test_a_recall_activation_is_shared_and_forgotten_with_what_it_quotes(
    store: MemoryStore, manual_clock: ManualClock
) -> None:
    """What a search leaves in context is in the database: another handle sees it; it
    fades by time; forgetting a message it quotes removes it."""
    with PartnerMemory(store, "agent", clock=manual_clock, settings=NO_TIMER) as memory:
        _days(memory, manual_clock)
        found = memory.recall("Tuesday-topic")
        assert found.hits
    with PartnerMemory(store, "agent", clock=manual_clock, settings=NO_TIMER) as other:
        names = [b.name for b in other.context([Domain.MEMORY])]
        assert names.count("activated_memory_slices") == 1
        manual_clock.advance(10 * 60_000)  # 5 a minute: half faded, still there
        assert any(b.name == "activated_memory_slices" for b in other.context())
        other.forget_messages([found.hits[0].message.id])
        assert all(b.name != "activated_memory_slices" for b in other.context())


def test_a_quiet_gap_no_process_ran_through_starts_a_new_session(
    store_url: str, manual_clock: ManualClock
) -> None:
    """5 turns, close, 3 hours later (nothing ran meanwhile) 2 turns, roll: two units."""
    with _opened(store_url, "cli", manual_clock) as memory:
        for i in range(5):
            memory.record_turn(f"yesterday {i}", "ok")
    manual_clock.advance(3 * HOUR)
    with _opened(store_url, "cli", manual_clock) as memory:
        memory.record_turn("today 0", "ok")
        memory.record_turn("today 1", "ok")
        memory.wait()
        memory.roll_now()
        units = [
            {m.text.split()[0] for m in memory.core.read_messages(u) if m.role == "user"}
            for u in memory.core.unit_ids()
        ]
    assert sorted(units, key=str) == [{"today"}, {"yesterday"}]


def test_a_turn_that_races_the_idle_check_is_not_rolled_into_the_old_session(
    store: MemoryStore, manual_clock: ManualClock
) -> None:
    """The idle check runs after the next day's first turn was recorded: the old
    conversation is rolled alone, the new turn stays in the window for the next unit."""
    with PartnerMemory(store, "agent", clock=manual_clock, settings=NO_TIMER) as memory:
        for i in range(3):
            memory.record_turn(f"old {i}", "ok")
        manual_clock.advance(2 * HOUR)
        assert memory.rolling.idle_due()  # the idle check decides to roll...
        memory.trajectory.record_turn_counted("new 0", "ok")  # ...a turn lands meanwhile...
        future = memory.rolling.trigger(idle=True, recheck=True)  # ...then it rolls
        assert future is not None
        future.result()
        memory.wait()
        (unit,) = memory.core.unit_ids()
        assert {m.text for m in memory.core.read_messages(unit) if m.role == "user"} == {
            "old 0",
            "old 1",
            "old 2",
        }
        assert [w.message.text for w in memory.window()] == ["new 0", "ok"]


@pytest.mark.slow
def test_four_processes_talking_in_bursts_never_share_a_unit_across_a_gap(
    store_url: str, tmp_path: Path
) -> None:
    """4 OS processes record bursts 2 h apart on their clock, with no idle check anywhere:
    no unit holds two bursts, every message is stored once and in order; a replay of
    the same transcript makes the same units."""
    workers, bursts, turns = 4, 4, 5
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.burst_worker",
                store_url,
                f"w{w}",
                str(workers),
                str(bursts),
                str(turns),
                str(2 * HOUR),
                str(tmp_path),
            ],
            stdin=subprocess.DEVNULL,
        )
        for w in range(workers)
    ]
    for proc in procs:
        assert proc.wait(timeout=600) == 0
    settings = RollingSettings(max_messages=8, idle_check_interval_s=0)
    store = open_store(store_url)
    try:
        clock = ReplayClock()
        with PartnerMemory(store, "shared", clock=clock, settings=settings) as memory:
            clock.set(1_700_000_000_000 + bursts * 2 * HOUR)
            memory.roll_now()
            live = _bursts_per_unit(memory)
            stored = [m for u in memory.core.unit_ids() for m in memory.core.read_messages(u)]
        assert all(len(held) == 1 for held in live), live
        assert len(stored) == workers * bursts * turns * 2
        assert len({m.id for m in stored}) == len(stored)
        for w in range(workers):
            mine = [m.text for m in stored if m.role == "user" and m.text.startswith(f"w{w} ")]
            assert mine == [f"w{w} b{b} t{t}" for b in range(bursts) for t in range(turns)]
        # the same messages replayed, with their times: the same sessions
        replay = Transcript(
            "bursts",
            "jsonl",
            tuple(Message(m.role, m.content, timestamp=m.timestamp) for m in stored),
            tuple("stored" for _ in stored),
        )
        replay_clock = ReplayClock()
        with PartnerMemory(store, "replayed", clock=replay_clock, settings=settings) as again:
            ingest(again, replay, replay_clock)
            assert sorted(map(sorted, _bursts_per_unit(again))) == sorted(map(sorted, live))
    finally:
        store.close()


def _bursts_per_unit(memory: PartnerMemory) -> list[set[str]]:
    return [
        {m.text.split()[1] for m in memory.core.read_messages(u) if m.role == "user"}
        for u in memory.core.unit_ids()
    ]


# -- clean text ---------------------------------------------------------------------

NAMES = st.text(
    st.characters(blacklist_characters="[]:\n\r", blacklist_categories=("Cs", "Cc")),
    min_size=1,
    max_size=12,
).filter(lambda n: n.strip() == n and n.strip())
BODIES = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=60
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(user=BODIES, answer=BODIES, name=NAMES, hidden=st.booleans(), named=st.booleans())
def test_what_is_recorded_is_what_every_interface_returns_as_text(
    tmp_path_factory: pytest.TempPathFactory,
    user: str,
    answer: str,
    name: str,
    hidden: bool,
    named: bool,
) -> None:
    """Any text, any speaker, NO_REPLY: `text` is what was recorded, the speaker and the
    status markers beside it - in the window, once stored, and through the documents."""
    output = f"NO_REPLY\n{answer}" if hidden else answer
    source = f"USER: {name}" if named else name
    db = tmp_path_factory.mktemp("clean") / "memory.db"
    with PartnerMemory(open_store(db), "agent", owns_store=True, settings=NO_TIMER) as memory:
        turn = memory.record_turn(user, output, source=source)
        shown = answer.lstrip("\n") if hidden else answer
        for read in (memory.window()[0].message, turn.user):
            assert (read.text, read.speaker, read.markers) == (user, name, ())
        held = memory.window()[1].message
        assert (held.text, held.speaker) == (shown, "AGENT")
        assert held.markers == (("NOT_REPLIED",) if hidden else ())
        memory.roll_now()
        stored = memory.core.read_messages(memory.core.unit_ids()[0])
        assert [m.text for m in stored] == [user, shown]
        for message in stored:
            document = message.to_dict()
            assert (document["text"], document["speaker"], document["markers"]) == (
                message.text,
                message.speaker,
                list(message.markers),
            )
            assert Message.from_dict(document) == message  # what the client reads back


def test_offline_summaries_name_the_participants_not_their_roles(
    store: MemoryStore, manual_clock: ManualClock
) -> None:
    """Plain messages with speakers, and turns with the default source: the summary names
    Ana once, never USER, user or assistant as a participant."""
    with PartnerMemory(store, "agent", clock=manual_clock, settings=NO_TIMER) as memory:
        memory.record_messages(
            [
                Message(
                    "user", "I adopted a cat called Luna last week.", metadata={"speaker": "Ana"}
                ),
                Message("assistant", "Luna is a lovely name for a cat."),
                Message(
                    "user", "She hates the vacuum cleaner though.", metadata={"speaker": "Ana"}
                ),
            ]
        )
        memory.record_turn("My sister Ana is visiting tomorrow.", "Enjoy the visit.")
        result = memory.roll_now()
        assert result is not None
        head = result.summary.split(":", 1)[0]
        assert head == "I talked with Ana and the user"
        for role in ("USER", "user,", "assistant", "[", "]"):
            assert role not in result.summary.replace("the user", "")


def test_a_live_server_and_its_inspector_show_one_unchanging_context(tmp_path: Path) -> None:
    """`serve`: 3 rollings, 6 reads of the context, the inspector's page between them - the
    snapshot stays the newest summary, the page shows exactly the XML, and the window
    comes back as clean text with its interaction times."""
    import html
    import re

    from tests.http_server import Server

    server = Server(str(tmp_path / "served.db"))
    try:
        with server.client() as client:
            for day in ("Monday", "Tuesday", "Wednesday"):
                made = client.post(
                    "/v1/namespaces/agent/turns",
                    json={
                        "user_input": f"{day} we planned the {day}-trip",
                        "assistant_output": "ok",
                    },
                )
                assert made.status_code == 201, made.text
                assert client.post("/v1/namespaces/agent/roll").json()["rolled"]
            xml = client.get("/v1/namespaces/agent/context", params={"format": "xml"}).text
            for _ in range(6):
                again = client.get("/v1/namespaces/agent/context", params={"format": "xml"}).text
                assert again == xml
                page = client.get("/namespace", params={"ns": "agent"})
                assert page.status_code == 200
                shown = re.search(r"<summary>As XML</summary><pre>(.*?)</pre>", page.text, re.S)
                assert shown is not None
                assert html.unescape(shown.group(1)) == xml
            blocks = client.get("/v1/namespaces/agent/context").json()["blocks"]
            assert "Wednesday" in blocks[0]["snapshot"]
            client.post(
                "/v1/namespaces/agent/turns",
                json={"user_input": "Hi", "assistant_output": "NO_REPLY", "source": "USER: Mei"},
            )
            window = client.get("/v1/namespaces/agent/window").json()["messages"]
            assert [(m["text"], m["speaker"], m["markers"]) for m in window] == [
                ("Hi", "Mei", []),
                ("", "AGENT", ["NOT_REPLIED"]),
            ]
            assert all(isinstance(m["interaction"], int) for m in window)
    finally:
        server.stop()


def test_a_context_with_the_window_says_what_is_stored_and_what_was_said_since(
    store: MemoryStore, manual_clock: ManualClock
) -> None:
    """For a client without a transcript (MCP): nothing stored says so; after a rolling,
    the summary and then the newest unsummarised messages, cut and escaped."""
    from partner_memory.context.render import (
        NOTHING_STORED,
        RECENT_CHARS,
        RECENT_MESSAGES,
        render_with_window,
    )

    with PartnerMemory(store, "agent", clock=manual_clock, settings=NO_TIMER) as memory:
        assert render_with_window(memory.context(), memory.window()) == NOTHING_STORED
        _session(memory, manual_clock, "Monday")
        memory.record_turn("Tuesday <b>& more</b> " + "x" * 2 * RECENT_CHARS, "Noted")
        for i in range(RECENT_MESSAGES):
            memory.record_turn(f"Tuesday line {i}", f"Answer {i}")
        text = render_with_window(memory.context(), memory.window())
        assert text.index("<dialog_history") < text.index("<recent_messages")
        assert "Monday" in text.split("<recent_messages")[0]
        assert f'<recent_messages earlier="{RECENT_MESSAGES + 2}">' in text
        assert "Tuesday line 0" not in text  # only the newest RECENT_MESSAGES
        assert text.count("<message ") == RECENT_MESSAGES
        assert '<message role="assistant" speaker="AGENT" at="' in text
        assert text.rstrip().endswith("Answer 19</message>\n</recent_messages>")
    with PartnerMemory(store, "cut", clock=manual_clock, settings=NO_TIMER) as memory:
        memory.record_turn("<b>& more</b> " + "x" * 2 * RECENT_CHARS, "Noted")
        text = render_with_window(memory.context(), memory.window())
        assert "&lt;b&gt;&amp; more&lt;/b&gt;" in text
        assert "x" * (RECENT_CHARS - 20) + "…</message>" in text
