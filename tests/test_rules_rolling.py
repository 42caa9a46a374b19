"""Rules R13-R20: dialog rolling, compression, summaries, the dialog_history block, AfterRolling."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from partner_memory import markers
from partner_memory.context import Domain
from partner_memory.memory import PartnerMemory
from partner_memory.model import Message
from partner_memory.rolling import (
    ChatClient,
    ExtractiveSummarizer,
    LLMCompressor,
    LLMSettings,
    RollingResult,
    RollingSettings,
    SummarizerChain,
    TruncatingCompressor,
    UsageMeter,
)
from partner_memory.rolling.compress import CUT_MARK, truncate
from partner_memory.rolling.increment import by_content, resolve_increment
from partner_memory.rolling.prompts import summary_messages
from partner_memory.rolling.summarize import EMPTY_PLACEHOLDER, EXCEPTION_PLACEHOLDER
from partner_memory.store import MemoryStore
from partner_memory.store.contract.base import WindowAppend
from partner_memory.store.sqlite import SQLiteStore
from tests.conftest import ManualClock
from tests.helpers import assert_unit_consistent, messages

HOUR = 3_600_000


class RecordingSummarizer:
    """Summarises by counting, and keeps what it was given."""

    name = "recording"

    def __init__(self, text: str = "summary") -> None:
        self.text = text
        self.seen: list[list[Message]] = []
        self.gate: threading.Event | None = None

    def summarize(self, messages: Sequence[Message], meter: UsageMeter) -> str:
        if self.gate is not None:
            self.gate.wait(10)
        self.seen.append(list(messages))
        return f"{self.text} of {len(messages)}"


class FailingSummarizer:
    name = "failing"

    def summarize(self, messages: Sequence[Message], meter: UsageMeter) -> str:
        raise RuntimeError("model exploded")


class BlankSummarizer:
    name = "blank"

    def summarize(self, messages: Sequence[Message], meter: UsageMeter) -> str:
        return "   "


@pytest.fixture
def summarizer() -> RecordingSummarizer:
    return RecordingSummarizer()


@pytest.fixture
def memory(
    store: MemoryStore, manual_clock: ManualClock, summarizer: RecordingSummarizer
) -> Iterator[PartnerMemory]:
    with PartnerMemory(
        store, "agent", summarizers=[summarizer], clock=manual_clock, idle_timer=False
    ) as opened:
        yield opened


def turns(memory: PartnerMemory, clock: ManualClock, n: int, tag: str = "t") -> None:
    for i in range(n):
        clock.advance(1000)
        memory.record_turn(f"{tag} question {i}", f"{tag} answer {i}", source="USER: Mei")


def test_r13_count_trigger_keeps_newest_sixth(
    memory: PartnerMemory, manual_clock: ManualClock
) -> None:
    """R13: at 72 messages a background rolling stores them and keeps the newest 12."""
    turns(memory, manual_clock, 35)
    memory.wait()
    assert memory.core.unit_ids() == []
    turns(memory, manual_clock, 1, "last")
    memory.wait()
    (unit_id,) = memory.core.unit_ids()
    assert memory.core.get_unit_info(unit_id).message_count == 72
    kept = memory.trajectory.snapshot()
    assert len(kept) == 12
    assert kept[-1].content.endswith("last answer 0")


def test_r13_a_count_from_before_a_rolling_committed_takes_no_lease(
    sqlite_store: SQLiteStore, manual_clock: ManualClock
) -> None:
    """R13 is judged on the window as stored: a turn appended while a rolling was in
    flight counts the messages that rolling trimmed since, and triggers nothing - not
    even the lease taken and given back (two writes in the caller's turn)."""
    with PartnerMemory(sqlite_store, "ns", clock=manual_clock, idle_timer=False) as memory:
        turns(memory, manual_clock, 36)
        memory.wait()
        assert (len(memory.core.unit_ids()), len(memory.trajectory)) == (1, 12)
        commits = sqlite_store.commit_counts.commits
        stale = WindowAppend(length=memory.settings.max_messages + 2, previous_interaction=None)
        assert memory.rolling.after_turn(stale) is None
        assert sqlite_store.commit_counts.commits == commits
        # a window that is full as stored still rolls
        turns(memory, manual_clock, 30)
        memory.wait()
        assert (len(memory.core.unit_ids()), len(memory.trajectory)) == (1, 12)
        assert memory.core.list_units().units[0].message_count == 132


def test_r13_numbers_are_configurable(store: MemoryStore, manual_clock: ManualClock) -> None:
    """R13: threshold and divisor are settings."""
    settings = RollingSettings(max_messages=10, retain_divisor=2)
    with PartnerMemory(
        store, "agent", settings=settings, clock=manual_clock, idle_timer=False
    ) as memory:
        turns(memory, manual_clock, 5)
        memory.wait()
        assert len(memory.trajectory) == 5
        assert memory.core.list_units().units[0].message_count == 10


def test_r14_idle_rolls_everything_and_refreshes_session(
    memory: PartnerMemory, manual_clock: ManualClock
) -> None:
    """R14: after more than an hour idle, everything is stored and a new session begins."""
    turns(memory, manual_clock, 3)
    session = memory.core.memory_session_id
    manual_clock.advance(HOUR)
    assert memory.check_idle() is None  # exactly one hour is not "more than"
    manual_clock.advance(1)
    future = memory.check_idle()
    assert future is not None
    result = future.result(10)
    assert result is not None
    assert (result.idle, result.retain_divisor) == (True, None)
    assert len(memory.trajectory) == 0
    assert memory.core.memory_session_id != session
    assert memory.core.get_unit_info(session).message_count == 6
    assert memory.check_idle() is None  # once per quiet period
    turns(memory, manual_clock, 1)
    memory.roll_now()
    assert len(memory.core.unit_ids()) == 2


def test_r14_needs_more_than_one_message(memory: PartnerMemory, manual_clock: ManualClock) -> None:
    """R14: a trajectory of one message does not roll when idle."""
    memory.record_messages([Message(role="user", content="alone")], interaction=manual_clock())
    manual_clock.advance(2 * HOUR)
    assert memory.check_idle() is None


def test_r14_timer_checks_periodically(store: MemoryStore, manual_clock: ManualClock) -> None:
    """R14: the background timer runs the idle check on its own."""
    settings = RollingSettings(idle_check_interval_s=0.02)
    with PartnerMemory(store, "agent", settings=settings, clock=manual_clock) as memory:
        turns(memory, manual_clock, 2)
        manual_clock.advance(2 * HOUR)
        deadline = time.monotonic() + 10
        while not memory.core.unit_ids() and time.monotonic() < deadline:
            time.sleep(0.02)
        memory.wait()
        assert len(memory.core.unit_ids()) == 1
        assert len(memory.trajectory) == 0


def test_r15_one_rolling_at_a_time(
    memory: PartnerMemory, manual_clock: ManualClock, summarizer: RecordingSummarizer
) -> None:
    """R15: a trigger while a rolling runs returns at once; the turn does not wait."""
    summarizer.gate = threading.Event()
    turns(memory, manual_clock, 3)
    first = memory.rolling.trigger(idle=False)
    assert first is not None
    assert memory.rolling.trigger(idle=False) is None
    started = time.monotonic()
    turns(memory, manual_clock, 1, "during")
    assert time.monotonic() - started < 5  # recorded while the summariser is blocked
    summarizer.gate.set()
    assert first.result(10) is not None


def test_r15_tiny_snapshot_does_nothing(memory: PartnerMemory) -> None:
    """R15: a snapshot of zero or one message does nothing."""
    assert memory.roll_now() is None
    memory.record_messages(messages(1))
    assert memory.roll_now() is None
    assert memory.core.unit_ids() == []


def test_r16_increment_reference_rule() -> None:
    """R16: the snapshot after the longest unit suffix that equals a snapshot prefix."""
    a, b, c, d = messages(4)
    assert resolve_increment([], [a, b]) == [a, b]
    assert resolve_increment([a, b, c], [b, c, d]) == [d]
    assert resolve_increment([a, b], [c, d]) == [c, d]
    assert resolve_increment([a, b, c], [a, b, c]) == []


def test_r16_ids_prevent_accidental_content_matches() -> None:
    """R16: two different "ok" messages match by content but not by id."""
    old_ok = Message(role="user", content="ok")
    new_ok = Message(role="user", content="ok")
    more = Message(role="user", content="more")
    assert resolve_increment([old_ok], [new_ok, more], key=by_content) == [more]
    assert resolve_increment([old_ok], [new_ok, more]) == [new_ok, more]


def test_r16_kept_messages_are_not_stored_twice(
    memory: PartnerMemory, manual_clock: ManualClock
) -> None:
    """R16: the kept sixth is not stored again by the next rolling, even across sessions."""
    turns(memory, manual_clock, 36)
    memory.wait()
    memory.core.refresh_memory_session()  # a new unit: the reference would duplicate here
    turns(memory, manual_clock, 3, "new")
    result = memory.roll_now()
    assert result is not None
    assert [m.content.split("\n\n")[1] for m in result.increment_messages][:2] == [
        "new question 0",
        "new answer 0",
    ]
    stored = [m.id for u in memory.core.unit_ids() for m in memory.core.read_messages(u)]
    assert len(stored) == len(set(stored)) == 78


def test_r16_empty_increment_only_refreshes_when_idle(
    memory: PartnerMemory, manual_clock: ManualClock
) -> None:
    """R16: an empty increment does nothing, except that idle still refreshes the session."""
    turns(memory, manual_clock, 36)
    memory.wait()
    kept = memory.trajectory.snapshot()
    assert len(kept) == 12  # already stored by the count rolling
    session = memory.core.memory_session_id
    slices = memory.core.list_slices(session)
    assert memory.roll_now() is None
    assert memory.trajectory.snapshot() == kept
    assert memory.core.memory_session_id == session
    assert memory.roll_now(idle=True) is None
    assert memory.core.memory_session_id != session
    assert memory.core.list_slices(session) == slices


def test_r17_truncation_cuts_at_sentence_boundaries() -> None:
    """R17: 900 characters, head and tail around the marker, cuts at sentence ends."""
    body = "".join(f"Sentence number {i} is here. " for i in range(100))
    cut = truncate(body, 900, 80)
    assert len(cut) <= 900
    head, tail = cut.split(CUT_MARK)
    assert head.endswith(". ") or head.endswith(".")
    assert body.startswith(head)
    assert body.endswith(tail)
    chinese = "我们聊了很多。" * 300
    head, tail = truncate(chinese).split(CUT_MARK)
    assert head.endswith("。")
    assert truncate("short") == "short"


def test_r17_compression_feeds_summary_but_originals_are_stored(
    memory: PartnerMemory, summarizer: RecordingSummarizer
) -> None:
    """R17: long bodies reach the summariser compressed and marked; units keep the originals."""
    long_body = "The itinerary for the week. " * 60
    original = Message(role="user", content=markers.user_text("USER: Mei", long_body))
    memory.record_messages([original, Message(role="assistant", content="noted")])
    result = memory.roll_now()
    assert result is not None
    seen = summarizer.seen[-1][0]
    assert seen.content.startswith("[USER: Mei]: [COMPRESSED]:\n\n")
    assert CUT_MARK in seen.content
    assert len(markers.split(seen.content)[1]) <= 900
    stored = memory.core.read_messages(result.memory_unit.id)
    assert stored[0] == original


def test_r17_llm_compression_accepted_only_if_shorter(fake_llm: Any) -> None:
    """R17: the LLM's answer is used if non-empty and shorter, else the cut."""
    compressor = LLMCompressor(
        ChatClient(LLMSettings(base_url=fake_llm.base_url, model="m", max_retries=0))
    )
    long_text = "x. " * 600
    unknown = Message(role="user", content=long_text)
    short = Message(role="user", content="short")
    fake_llm.script.append(("ok", "brief"))
    meter = UsageMeter()
    out = compressor.compress([unknown, short], meter)
    assert out[0].content == "[[Unknown]: Unknown]: [COMPRESSED]:\n\nbrief"
    assert out[1] is short
    fake_llm.script.append(("ok", "y" * 5000))
    out = compressor.compress([unknown], meter)
    assert CUT_MARK in out[0].content
    assert any("not shorter" in f for f in meter.fallbacks)
    fake_llm.script.append(("status", 500))
    out = compressor.compress([unknown], meter)
    assert CUT_MARK in out[0].content
    assert meter.calls == 3


def test_r17_offline_compressor_only_touches_long_bodies() -> None:
    """R17: the threshold is on the body, after the marker line."""
    compressor = TruncatingCompressor(threshold=10, limit=60)
    just = Message(role="user", content="[USER: a]:\n\n" + "y" * 10)
    over = Message(role="user", content="[USER: a]:\n\n" + "y" * 100)
    out = compressor.compress([just, over], UsageMeter())
    assert out[0] is just
    assert out[1].content.startswith("[USER: a]: [COMPRESSED]:")


def test_r18_prompt_is_a_structured_task() -> None:
    """R18: tag notes, then the messages with their roles; language follows the conversation."""
    english = summary_messages([Message(role="user", content="[USER: Mei]:\n\nhello")])
    assert "first person" in english[0]["content"]
    assert "<notes>" in english[1]["content"]
    assert '<message role="user">[USER: Mei]:' in english[1]["content"]
    chinese = summary_messages([Message(role="user", content="我下周三要做手术")])
    assert "第一人称" in chinese[0]["content"]


def test_r18_placeholders_only_when_everything_failed() -> None:
    """R18: the reference's placeholder texts appear only after every summariser failed."""
    increment = messages(3, "we talked")
    meter = UsageMeter()
    failed = SummarizerChain([FailingSummarizer()]).summarize(increment, meter)
    assert (failed.text, failed.summarizer) == (EXCEPTION_PLACEHOLDER, "placeholder")
    blank = SummarizerChain([BlankSummarizer()]).summarize(increment, meter)
    assert (blank.text, blank.summarizer) == (EMPTY_PLACEHOLDER, "placeholder")
    rescued = SummarizerChain([FailingSummarizer(), ExtractiveSummarizer()]).summarize(
        increment, meter
    )
    assert rescued.summarizer == "extractive"
    assert "we talked" in rescued.text
    assert any("model exploded" in f for f in meter.fallbacks)


def test_r18_offline_summary_handles_chinese() -> None:
    """R18: the extractive summary segments Chinese and keeps who said what."""
    text = ExtractiveSummarizer().summarize(
        [
            Message(role="user", content="[USER: 小林]:\n\n我下周三要做胆囊手术，有点紧张。"),
            Message(role="assistant", content="[[AGENT]: self]:\n\n我会在周三早上提醒你禁食。"),
        ],
        UsageMeter(),
    )
    assert text.startswith("我和小林的对话")
    assert "胆囊手术" in text
    assert "我：" in text


def test_r19_rolling_leaves_dialog_history_block(
    memory: PartnerMemory, manual_clock: ManualClock
) -> None:
    """R19: the slice's summary lands in context with unit, slice and date-time."""
    turns(memory, manual_clock, 2)
    result = memory.roll_now()
    assert result is not None
    (block,) = memory.context_source.blocks()
    assert (block.name, block.source) == ("dialog_history", "dialog_rolling")
    assert block.domains == {Domain.MEMORY, Domain.COMMUNICATION}
    assert (block.replace_fade, block.time_fade_per_minute, block.activate) == (20, 5, 10)
    assert result.summary in block.full
    assert result.memory_unit.id in block.full
    assert result.memory_slice.id in block.full
    assert "2023-11-14" in block.full
    xml = memory.context_xml([Domain.MEMORY])
    assert xml.startswith('<dialog_history source="dialog_rolling" urgency="NORMAL">')
    assert memory.context([Domain.ACTION]) == []


def test_r19_restart_restores_recent_context(store: MemoryStore, manual_clock: ManualClock) -> None:
    """R19: a reopened memory puts the newest slices back in context."""
    with PartnerMemory(store, "agent", clock=manual_clock, idle_timer=False) as memory:
        for i in range(7):
            turns(memory, manual_clock, 1, f"round{i}")
            memory.roll_now()
    with PartnerMemory(store, "agent", clock=manual_clock, idle_timer=False) as reopened:
        resolved = reopened.context([Domain.MEMORY])
        assert len(resolved) == 1
        assert "round6" in resolved[0].snapshot
        assert len(resolved[0].history) == 4  # five newest slices, merged under one source key


def test_r20_consumers_run_in_order_isolated(
    memory: PartnerMemory, manual_clock: ManualClock
) -> None:
    """R20: consumers run once each, in order, in the background; a failure stops nothing."""
    seen: list[tuple[str, RollingResult]] = []

    def first(result: RollingResult) -> None:
        seen.append(("first", result))

    def broken(result: RollingResult) -> None:
        raise ValueError("consumer bug")

    def last(result: RollingResult) -> None:
        seen.append(("last", result))

    assert memory.register_after_rolling(first)
    assert memory.register_after_rolling(broken)
    assert memory.register_after_rolling(last)
    assert not memory.register_after_rolling(first)
    turns(memory, manual_clock, 2)
    result = memory.roll_now()
    turns(memory, manual_clock, 2)
    second = memory.roll_now()
    memory.wait()
    assert [name for name, _ in seen] == ["first", "last", "first", "last"]
    assert seen[0][1] is result
    assert second is not None
    assert [f.consumer for f in memory.after_rolling.failures] == [
        "test_r20_consumers_run_in_order_isolated.<locals>.broken"
    ] * 2
    assert result is not None
    assert result.rolling_size == 4
    assert result.retain_divisor == 6
    assert len(result.increment_messages) == 4
    assert result.memory_slice.summary == result.summary
    assert_unit_consistent(memory.core, result.memory_unit.id)


def test_r20_slow_consumer_does_not_delay_rolling(
    memory: PartnerMemory, manual_clock: ManualClock
) -> None:
    """R20: consumers run after rolling, off its thread; close() waits for them."""
    gate = threading.Event()
    done: list[str] = []

    def slow(result: RollingResult) -> None:
        gate.wait(10)
        done.append(result.memory_slice.id)

    memory.register_after_rolling(slow)
    turns(memory, manual_clock, 2)
    result = memory.roll_now()
    assert result is not None
    assert done == []
    gate.set()
    memory.wait()
    assert done == [result.memory_slice.id]


def test_stats_add_up(memory: PartnerMemory, manual_clock: ManualClock) -> None:
    turns(memory, manual_clock, 2)
    memory.roll_now()
    turns(memory, manual_clock, 3)
    memory.roll_now()
    totals = memory.stats()
    assert (totals.rollings, totals.messages) == (2, 10)  # 4 // 6 = 0 kept: 4 + 6 stored
    assert totals.by_summarizer == {"recording": 2}
    assert totals.pipeline_ms > 0


def test_r15_one_kept_message_alone_in_the_window_stays_and_is_stored_once(
    store: MemoryStore, manual_clock: ManualClock
) -> None:
    """R12/R14/R15: when all the window holds is the one message a count rolling kept
    (8 // 6: stored already), neither the idle timer (it needs more than one message)
    nor an idle flush rolls it (a snapshot of one does nothing); the flush notes the
    quiet, and the next rolling drops it without storing it again."""
    settings = RollingSettings(max_messages=8, retain_divisor=6)
    with PartnerMemory(
        store, "agent", settings=settings, clock=manual_clock, idle_timer=False
    ) as memory:
        turns(memory, manual_clock, 4)
        memory.wait()
        (kept,) = [w.message.id for w in memory.window()]
        assert store.stored_message_ids("agent", [kept]) == {kept}
        manual_clock.advance(HOUR + 1)
        assert memory.check_idle() is None
        assert memory.roll_now(idle=True) is None
        assert [w.message.id for w in memory.window()] == [kept]
        turns(memory, manual_clock, 1)
        memory.roll_now(idle=True)
        assert memory.window() == []
        stored = [m.id for u in memory.core.unit_ids() for m in memory.core.read_messages(u)]
        assert len(stored) == len(set(stored)) == 10


def test_r12_what_a_count_rolling_keeps_is_stored_and_in_the_window_until_idle(
    store: MemoryStore, manual_clock: ManualClock
) -> None:
    """R12/R13/R14: a count rolling keeps the newest share of its snapshot in the window,
    stored already - the one state where a message is in a unit and in the window; the
    next rolling stores none of them again, and the idle rolling takes them out."""
    settings = RollingSettings(max_messages=12, retain_divisor=6)
    with PartnerMemory(
        store, "agent", settings=settings, clock=manual_clock, idle_timer=False
    ) as memory:
        turns(memory, manual_clock, 6)
        memory.wait()
        window = [w.message.id for w in memory.window()]
        both = store.stored_message_ids("agent", window)
        assert len(both) == 2  # 12 // 6, the snapshot's newest
        assert set(window[:2]) == both
        turns(memory, manual_clock, 5)  # the window is full again: 2 kept + 10 new
        memory.wait()
        stored = [m.id for u in memory.core.unit_ids() for m in memory.core.read_messages(u)]
        assert len(stored) == len(set(stored)) == 22  # the kept ones were not stored twice
        manual_clock.advance(HOUR + 1)
        future = memory.check_idle()
        assert future is not None
        future.result(10)
        assert memory.window() == []
        stored = [m.id for u in memory.core.unit_ids() for m in memory.core.read_messages(u)]
        assert len(stored) == len(set(stored)) == 22
