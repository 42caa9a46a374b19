"""Rules R1-R8 of design.md, each test named after the rule it checks, on every backend."""

from __future__ import annotations

import uuid

import pytest

from partner_memory.core import MemoryCore
from partner_memory.errors import InvalidInputError, NotFoundError
from partner_memory.model import Message
from partner_memory.normalize import RawSlice, normalize_slices, normalize_unit_timestamp
from partner_memory.store import MemoryStore
from tests.conftest import FakeClock
from tests.helpers import assert_unit_consistent, messages


@pytest.fixture
def core(store: MemoryStore, clock: FakeClock) -> MemoryCore:
    return MemoryCore(store, "agent", clock=clock)


def test_r1_message_fields_round_trip(core: MemoryCore) -> None:
    """R1: role, content, id, timestamp and metadata come back exactly."""
    sent = [
        Message(role="user", content="你好 👋", timestamp=1, metadata={"speaker": "小林"}),
        Message(role="assistant", content=""),
        Message(role="system", content="rules"),
    ]
    update = core.update_memory_unit(sent, "s")
    assert core.read_messages(update.unit.id) == sent


def test_r1_role_must_be_known() -> None:
    """R1: role is one of user, assistant, system."""
    with pytest.raises(InvalidInputError, match="role"):
        Message(role="tool", content="x")  # type: ignore[arg-type]


def test_r2_slice_fields(core: MemoryCore, clock: FakeClock) -> None:
    """R2: a slice has a UUID id, a half-open range, a summary and a creation time."""
    update = core.update_memory_unit(messages(2), "two messages")
    memory_slice = update.slice
    uuid.UUID(memory_slice.id)
    assert (memory_slice.start_index, memory_slice.end_index) == (0, 2)
    assert memory_slice.summary == "two messages"
    assert memory_slice.timestamp == clock.now


def test_r2_slices_order_by_timestamp(core: MemoryCore) -> None:
    """R2: slices list in creation order."""
    first = core.update_memory_unit(messages(1), "a").slice
    second = core.update_memory_unit(messages(1), "b").slice
    assert core.list_slices(core.memory_session_id) == [first, second]


def test_r3_unit_holds_messages_and_slices(core: MemoryCore, clock: FakeClock) -> None:
    """R3: a unit has an id, its last update time, all messages and its slices."""
    core.update_memory_unit(messages(2, "a"), "a")
    update = core.update_memory_unit(messages(1, "b"), "b")
    unit = core.get_memory_unit(update.unit.id)
    assert unit.id == core.memory_session_id
    assert unit.timestamp == clock.now
    assert [m.content for m in unit.conversation_messages] == ["a-0", "a-1", "b-0"]
    assert [s.summary for s in unit.slices] == ["a", "b"]


def test_r4_new_core_starts_with_random_session(store: MemoryStore) -> None:
    """R4: a new core gets a random UUID session id; its unit set starts empty."""
    first = MemoryCore(store, "one")
    second = MemoryCore(store, "two")
    uuid.UUID(first.memory_session_id)
    assert first.memory_session_id != second.memory_session_id
    assert first.unit_ids() == []


def test_r4_reopened_core_keeps_session(store: MemoryStore) -> None:
    """R4: the session id is stored, so a reopened core extends the same unit."""
    session = MemoryCore(store, "agent").memory_session_id
    assert MemoryCore(store, "agent").memory_session_id == session


def test_r5_first_update_makes_slice_0_3(core: MemoryCore) -> None:
    """R5 (reference): a first update of three messages gives slice [0, 3)."""
    update = core.update_memory_unit(messages(3), "first")
    assert (update.slice.start_index, update.slice.end_index) == (0, 3)
    assert update.unit.id == core.memory_session_id
    assert update.unit.message_count == 3


def test_r5_second_update_appends_slice_1_3_found_by_id(core: MemoryCore) -> None:
    """R5 (reference): one message then two gives a second slice [1, 3), found again by id."""
    core.update_memory_unit(messages(1), "one")
    update = core.update_memory_unit(messages(2, "two"), "two")
    assert (update.slice.start_index, update.slice.end_index) == (1, 3)
    found = core.get_memory_slice(update.unit.id, update.slice.id)
    assert found == update.slice
    assert [m.content for m in core.read_slice_messages(update.unit.id, found.id)] == [
        "two-0",
        "two-1",
    ]


def test_r5_update_sets_unit_timestamp(core: MemoryCore, clock: FakeClock) -> None:
    """R5: every update stamps the unit with now."""
    core.update_memory_unit(messages(1), "a")
    clock.advance(60_000)
    update = core.update_memory_unit(messages(1), "b")
    assert core.get_unit_info(update.unit.id).timestamp == clock.now


def test_r5_rejects_bad_arguments_without_writing(core: MemoryCore) -> None:
    """R5: wrong types are refused before anything is stored."""
    with pytest.raises(InvalidInputError, match=r"messages\[1\]"):
        core.update_memory_unit([Message(role="user", content="ok"), "raw"], "s")  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match="summary"):
        core.update_memory_unit(messages(1), 42)  # type: ignore[arg-type]
    assert core.unit_ids() == []


def test_r6_missing_id_and_timestamp_are_filled() -> None:
    """R6: a slice without id gets a UUID; without positive timestamp it takes the unit's."""
    (fixed,) = normalize_slices([RawSlice(summary="s", timestamp=0)], 5, 777)
    uuid.UUID(fixed.id)
    assert fixed.timestamp == 777


def test_r6_indices_are_clamped() -> None:
    """R6: start clamps to [0, len]; end missing or below start becomes len, else clamps."""
    cases = {
        (-3, 2): (0, 2),
        (None, 2): (0, 2),
        (2, None): (2, 5),
        (4, 1): (4, 5),
        (1, 99): (1, 5),
        (9, 12): (5, 5),
    }
    for (start, end), expected in cases.items():
        (fixed,) = normalize_slices(
            [RawSlice(summary="s", id="x", start_index=start, end_index=end, timestamp=1)], 5, 1
        )
        assert (fixed.start_index, fixed.end_index) == expected, (start, end)


def test_r6_null_slices_dropped_and_sorted_stably() -> None:
    """R6: null slices are dropped; slices sort by timestamp, ties keep their order."""
    raws = [
        RawSlice(summary="b", id="b", timestamp=5),
        None,
        RawSlice(summary="a", id="a", timestamp=1),
        RawSlice(summary="c", id="c", timestamp=5),
    ]
    assert [s.id for s in normalize_slices(raws, 3, 1)] == ["a", "b", "c"]


def test_r6_unit_without_positive_timestamp_gets_now() -> None:
    """R6: a unit with no positive timestamp is stamped with now."""
    assert normalize_unit_timestamp(0, 42) == 42
    assert normalize_unit_timestamp(None, 42) == 42
    assert normalize_unit_timestamp(7, 42) == 7


def test_r7_unknown_unit_and_slice_are_not_found(core: MemoryCore) -> None:
    """R7: unknown ids raise NotFoundError and never create a unit."""
    update = core.update_memory_unit(messages(1), "x")
    with pytest.raises(NotFoundError, match="nope"):
        core.get_memory_unit("nope")
    with pytest.raises(NotFoundError, match="nope"):
        core.get_memory_slice(update.unit.id, "nope")
    with pytest.raises(NotFoundError):
        core.get_memory_slice("nope", update.slice.id)
    with pytest.raises(NotFoundError):
        core.read_slice_messages("nope", "nope")
    assert core.unit_ids() == [update.unit.id]


def test_r7_unknown_namespace_is_not_found_without_create(store: MemoryStore) -> None:
    """R7: opening a namespace for reading never creates it."""
    with pytest.raises(NotFoundError, match="ghost"):
        MemoryCore(store, "ghost", create=False)
    assert store.get_namespace("ghost") is None


def test_r7_refresh_session_starts_new_unit(core: MemoryCore) -> None:
    """R7: refreshing gives a new UUID, and the next update opens a new unit."""
    first = core.update_memory_unit(messages(2), "a")
    old = core.memory_session_id
    new = core.refresh_memory_session()
    assert new != old
    assert core.memory_session_id == new
    second = core.update_memory_unit(messages(1), "b")
    assert second.unit.id == new
    assert (second.slice.start_index, second.slice.end_index) == (0, 1)
    assert core.get_unit_info(first.unit.id).message_count == 2


def test_r7_list_units_paged_newest_first(core: MemoryCore, clock: FakeClock) -> None:
    """R7: units list newest first, in pages, filtered by time range."""
    ids = []
    for _ in range(5):
        ids.append(core.update_memory_unit(messages(1), "s").unit.id)
        core.refresh_memory_session()
        clock.advance(1000)
    page = core.list_units(limit=2, offset=1)
    assert [u.id for u in page.units] == [ids[3], ids[2]]
    assert page.total == 5
    middle = core.get_unit_info(ids[2]).timestamp
    window = core.list_units(since=middle, until=middle + 1)
    assert [u.id for u in window.units] == [ids[2]]
    with pytest.raises(InvalidInputError):
        core.list_units(limit=0)
    with pytest.raises(InvalidInputError):
        core.list_units(offset=-1)


def test_r7_message_ranges_validated(core: MemoryCore) -> None:
    """R7: negative or reversed ranges are errors, not empty reads."""
    unit_id = core.update_memory_unit(messages(3), "x").unit.id
    assert [m.content for m in core.read_messages(unit_id, 1, 2)] == ["m-1"]
    with pytest.raises(InvalidInputError, match="negative"):
        core.read_messages(unit_id, -1, 2)
    with pytest.raises(InvalidInputError, match="before it starts"):
        core.read_messages(unit_id, 2, 1)


class RecordingStore:
    """Delegates to a real store and records which verbs were called."""

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> object:
        self.calls.append(name)
        return getattr(self.inner, name)


def test_r8_opening_a_namespace_reads_no_message(store: MemoryStore, clock: FakeClock) -> None:
    """R8: a namespace opens and lists its units from headers, without reading messages."""
    core = MemoryCore(store, "agent", clock=clock)
    for _ in range(3):
        core.update_memory_unit(messages(50), "big")
        core.refresh_memory_session()
    recording = RecordingStore(store)
    reopened = MemoryCore(recording, "agent", create=False)  # type: ignore[arg-type]
    page = reopened.list_units()
    assert [u.message_count for u in page.units] == [50, 50, 50]
    assert "read_messages" not in recording.calls
    assert "read_slices" not in recording.calls


def test_r8_units_persist_independently(store: MemoryStore, clock: FakeClock) -> None:
    """R8: each unit is stored on its own; updating one leaves the others untouched."""
    core = MemoryCore(store, "agent", clock=clock)
    first = core.update_memory_unit(messages(2, "first"), "a")
    core.refresh_memory_session()
    core.update_memory_unit(messages(3, "second"), "b")
    again = core.get_memory_unit(first.unit.id)
    assert [m.content for m in again.conversation_messages] == ["first-0", "first-1"]
    assert_unit_consistent(core, first.unit.id)
