"""Rules R9-R12: the conversation trajectory and its text convention."""

from __future__ import annotations

import pytest

from partner_memory import markers
from partner_memory.errors import InvalidInputError
from partner_memory.model import Message
from partner_memory.store import MemoryStore
from partner_memory.store.sqlite import SQLiteStore
from partner_memory.testing.helpers import trim_window
from partner_memory.trajectory import Trajectory, dropped_ids, kept_count
from tests.conftest import ManualClock
from tests.helpers import messages


@pytest.fixture
def trajectory(store: MemoryStore, manual_clock: ManualClock) -> Trajectory:
    store.ensure_namespace("agent", "s")
    return Trajectory(store, "agent", clock=manual_clock)


def test_r9_trajectory_is_persisted_and_snapshots_are_copies(
    store: MemoryStore, trajectory: Trajectory, manual_clock: ManualClock
) -> None:
    """R9: the window survives a restart; a snapshot does not change with later writes."""
    trajectory.record_turn("hello", "hi there")
    snapshot = trajectory.snapshot()
    trajectory.record_turn("again", "yes")
    assert len(snapshot) == 2
    reopened = Trajectory(store, "agent", clock=manual_clock)
    assert reopened.snapshot() == trajectory.snapshot()
    assert reopened.last_interaction == manual_clock.now


def test_r10_turn_appends_user_then_assistant(trajectory: Trajectory) -> None:
    """R10: a reply appends the user input and the assistant output."""
    turn = trajectory.record_turn("where is Gion?", "In Kyoto.", source="USER: Mei")
    assert [m.role for m in trajectory.snapshot()] == ["user", "assistant"]
    assert turn.user.content == "[USER: Mei]:\n\nwhere is Gion?"
    assert turn.replied


def test_r10_structured_prompts_are_removed(trajectory: Trajectory) -> None:
    """R10: user messages starting with <input>, <context> or <?xml leave before a turn."""
    structured = [
        Message(role="user", content="  <input>task</input>"),
        Message(role="user", content="<context>blocks</context>"),
        Message(role="user", content='<?xml version="1.0"?><a/>'),
    ]
    kept = [
        Message(role="assistant", content="<input> from the assistant stays"),
        Message(role="user", content="plain words"),
    ]
    trajectory.record(structured + kept)
    trajectory.record_turn("next", "ok")
    assert [m.content for m in trajectory.snapshot()[:2]] == [m.content for m in kept]
    assert len(trajectory) == 4


def test_r11_markers() -> None:
    """R11: marker line, blank line, body; NO_REPLY is kept as [NOT_REPLIED] and not shown."""
    assert markers.user_text("USER: Mei", "hi") == "[USER: Mei]:\n\nhi"
    assert markers.assistant_text("hello") == ("[[AGENT]: self]:\n\nhello", True)
    assert markers.assistant_text("NO_REPLY") == ("[[AGENT]: self]: [NOT_REPLIED]:", False)
    assert markers.assistant_text("NO_REPLY\nthinking aloud") == (
        "[[AGENT]: self]: [NOT_REPLIED]:\n\nthinking aloud",
        False,
    )
    assert markers.assistant_text("NO_REPLYING is a word") == (
        "[[AGENT]: self]:\n\nNO_REPLYING is a word",
        True,
    )
    assert markers.assistant_text("") == ("[[AGENT]: self]:", True)
    assert markers.split("[[AGENT]: self]: [NOT_REPLIED]:\n\ntext") == (
        "[[AGENT]: self]: [NOT_REPLIED]",
        "text",
    )
    assert markers.split("[[AGENT]: self]:") == ("[[AGENT]: self]", "")
    assert markers.split("no marker here") == (None, "no marker here")
    assert markers.with_status(None, "COMPRESSED") == "[[Unknown]: Unknown]: [COMPRESSED]"


def test_r11_no_reply_turn_is_recorded_but_not_replied(trajectory: Trajectory) -> None:
    """R11: a NO_REPLY answer is stored with its status marker."""
    turn = trajectory.record_turn("are you there?", "NO_REPLY\nlet them rest")
    assert not turn.replied
    assert turn.assistant.content == "[[AGENT]: self]: [NOT_REPLIED]:\n\nlet them rest"


def test_r12_roll_keeps_newest_share_and_later_messages(
    store: MemoryStore, trajectory: Trajectory
) -> None:
    """R12: keep the last size // divisor of the snapshot, plus what came after it."""
    trajectory.record(messages(12, "old"))
    snapshot = trajectory.snapshot()
    trajectory.record(messages(3, "new"))
    dropped = dropped_ids(snapshot, 6)
    assert len(dropped) == 10
    trim_window(store, "agent", dropped)
    assert [m.content for m in trajectory.snapshot()] == [
        "old-10",
        "old-11",
        "new-0",
        "new-1",
        "new-2",
    ]


def test_r12_divisor_bounds() -> None:
    """R12: divisor below 1 counts as 1 (keep all); no divisor keeps nothing (idle)."""
    assert kept_count(72, 6) == 12
    assert kept_count(72, 0) == 72
    assert kept_count(72, -3) == 72
    assert kept_count(72, None) == 0
    assert kept_count(5, 6) == 0


def test_r12_roll_is_persisted(
    store: MemoryStore, trajectory: Trajectory, manual_clock: ManualClock
) -> None:
    """R12: the trimmed window is what a restart sees."""
    trajectory.record(messages(6))
    trim_window(store, "agent", dropped_ids(trajectory.snapshot(), None))
    assert len(Trajectory(store, "agent", clock=manual_clock)) == 0


def test_r12_last_interaction_moves_with_every_turn(
    trajectory: Trajectory, manual_clock: ManualClock
) -> None:
    """R12: the last-interaction time is updated on every recorded turn."""
    assert trajectory.last_interaction is None
    trajectory.record_turn("a", "b")
    first = trajectory.last_interaction
    manual_clock.advance(5000)
    trajectory.record_turn("c", "d")
    assert trajectory.last_interaction == first + 5000  # type: ignore[operator]
    trajectory.record(messages(1))  # plain messages do not count as interaction
    assert trajectory.last_interaction == first + 5000  # type: ignore[operator]


def test_duplicate_ids_are_refused_without_writing(trajectory: Trajectory) -> None:
    one = Message(role="user", content="x")
    trajectory.record([one])
    with pytest.raises(InvalidInputError, match="already in the trajectory"):
        trajectory.record([Message(role="user", content="y"), one])
    with pytest.raises(InvalidInputError):
        trajectory.record(["not a message"])  # type: ignore[list-item]
    assert len(trajectory) == 1


def test_turn_inputs_are_validated(sqlite_store: SQLiteStore, manual_clock: ManualClock) -> None:
    sqlite_store.ensure_namespace("agent", "s")
    trajectory = Trajectory(sqlite_store, "agent", clock=manual_clock)
    with pytest.raises(InvalidInputError, match="user_input"):
        trajectory.record_turn(3, "x")  # type: ignore[arg-type]
    assert len(trajectory) == 0
