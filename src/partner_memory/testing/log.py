"""The log layer (`LogStore`): committing rollings and replays, and the followers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from partner_memory.errors import ConflictError, InvalidInputError, NotFoundError
from partner_memory.model import LogEntry, Message
from partner_memory.rolling.follow import LogFollower
from partner_memory.store.contract.base import (
    AppendOptions,
    CommittedRolling,
    FollowerPosition,
    MemoryStore,
    ReplayStep,
    UnitQuery,
)
from partner_memory.store.contract.capabilities import RecordQuery, RecordStore
from partner_memory.store.contract.staged import Record, Staged, Unrecord
from partner_memory.testing.helpers import held, messages, offers, rolling


def _leased(store: MemoryStore, namespace: str, holder: str = "h") -> list[Message]:
    """The namespace's window, read under `holder`'s new lease."""
    state = store.begin_rolling(namespace, holder, ttl_ms=60_000)
    assert state is not None, "the lease should be free"
    return state.messages


def _rolled(store: MemoryStore, namespace: str, count: int, tag: str = "m") -> list[Message]:
    """`count` messages recorded, then rolled into a slice of their own (kept out of the
    window), as a count rolling would."""
    said = messages(count, tag)
    store.append_trajectory(namespace, said, AppendOptions(last_interaction=1_000))
    _leased(store, namespace)
    store.commit_rolling(namespace, rolling("h", said, drop=[m.id for m in said]))
    return said


def _keys(store: RecordStore, query: RecordQuery) -> list[str]:
    return [r.key for r in store.read_records("ns", query)]


def _none(entry: LogEntry) -> Sequence[Staged]:
    return []


def _record_seq(entry: LogEntry) -> Sequence[Staged]:
    return [Record(f"seq-{entry.seq:04d}", {"seq": entry.seq, "unit": entry.unit.id})]


class LogContract:
    """Every verb of `LogStore`."""

    def test_a_rolling_stores_logs_trims_and_releases_at_once(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "session-1")
        said = messages(4)
        store.append_trajectory("ns", said, AppendOptions(last_interaction=1_000))
        window = _leased(store, "ns")
        commit = rolling("h", window[:3], drop=[m.id for m in window[:2]], timestamp=2_000)
        done = store.commit_rolling("ns", commit)
        assert done.seq == 1
        assert done.update is not None
        assert done.update.unit.id == "session-1"
        assert (done.update.slice.start_index, done.update.slice.end_index) == (0, 3)
        assert store.read_messages("ns", "session-1", 0, 10) == said[:3]
        assert store.read_slices("ns", "session-1") == [done.update.slice]
        assert store.load_trajectory("ns").messages == said[2:]
        assert store.rolling_holder("ns") is None
        assert store.log_head("ns") == 1
        (entry,) = store.read_log("ns", 0)
        assert (entry.namespace, entry.seq, entry.idle) == ("ns", 1, False)
        assert entry.slice == done.update.slice
        assert entry.messages == tuple(said[:3])
        assert (entry.unit.id, entry.unit.message_count, entry.unit.slice_count) == (
            "session-1",
            3,
            1,
        )
        assert (entry.rolling_size, entry.retain_divisor) == (3, 6)
        assert store.read_log("ns", 1) == []
        assert store.log_head("ghost") == 0
        with pytest.raises(NotFoundError):
            store.read_log("ghost", 0)

    def test_a_rolling_without_the_lease_writes_nothing(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "s")
        said = messages(2)
        store.append_trajectory("ns", said, AppendOptions(last_interaction=1))
        with pytest.raises(ConflictError, match="lease"):
            store.commit_rolling("ns", rolling("nobody", said, drop=[m.id for m in said]))
        _leased(store, "ns", "a")
        with pytest.raises(ConflictError, match="lease"):
            store.commit_rolling("ns", rolling("b", said, drop=[m.id for m in said]))
        assert store.unit_ids("ns") == []
        assert store.load_trajectory("ns").messages == said
        assert store.log_head("ns") == 0
        assert store.rolling_holder("ns") == "a"

    def test_a_rolling_of_a_stored_message_is_refused_whole(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "s")
        first = _rolled(store, "ns", 2)
        later = messages(2, "later")
        store.append_trajectory("ns", later, AppendOptions(last_interaction=2_000))
        _leased(store, "ns")
        again = rolling("h", [*later, first[0]], drop=[m.id for m in later])
        with pytest.raises(ConflictError, match=first[0].id):
            store.commit_rolling("ns", again)
        assert store.load_trajectory("ns").messages == later
        assert store.log_head("ns") == 1
        assert store.rolling_holder("ns") == "h"  # the failed commit released nothing

    def test_an_idle_rolling_marks_the_quiet_and_opens_a_session(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "first")
        said = messages(2)
        store.append_trajectory("ns", said, AppendOptions(last_interaction=1_000))
        _leased(store, "ns")
        commit = rolling(
            "h",
            said,
            drop=[m.id for m in said],
            idle=True,
            last_interaction=1_000,
            new_session_id="second",
        )
        done = store.commit_rolling("ns", commit)
        assert done.update is not None
        assert done.update.unit.id == "first"
        assert held(store.get_namespace("ns")).memory_session_id == "second"
        assert store.window_activity("ns").idle_rolled_for == 1_000
        assert store.idle_candidates(5_000, ["ns"]) == []
        (entry,) = store.read_log("ns", 0)
        assert entry.idle
        assert entry.retain_divisor is None

    def test_an_empty_increment_trims_without_logging(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "s")
        said = messages(2)
        store.append_trajectory("ns", said, AppendOptions(last_interaction=1))
        _leased(store, "ns")
        done = store.commit_rolling("ns", rolling("h", [], drop=[said[0].id]))
        assert (done.update, done.seq) == (None, None)
        assert store.log_head("ns") == 0
        assert store.load_trajectory("ns").messages == said[1:]
        assert store.rolling_holder("ns") is None

    def test_a_replay_writes_its_steps_as_if_one_by_one(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "s")
        early, middle, late = messages(2, "early"), messages(1, "middle"), messages(1, "late")
        _leased(store, "ns")
        steps = [
            ReplayStep(early, 10),
            ReplayStep(middle, 20, rolling=rolling("h", early, drop=[m.id for m in early])),
            ReplayStep(late, None, interactions=[30]),
        ]
        (done,) = store.commit_replay("ns", "h", steps)
        assert done.seq == 1
        assert store.read_messages("ns", "s", 0, 10) == early
        state = store.load_trajectory("ns")
        assert state.messages == [*middle, *late]
        assert state.interactions == (20, 30)
        assert store.rolling_holder("ns") is None
        assert [e.messages for e in store.read_log("ns", 0)] == [tuple(early)]

    def test_a_replay_writes_what_its_rollings_write_in_turn(self, store: MemoryStore) -> None:
        """Into the unit already stored, idle rollings starting new sessions (one with
        nothing new), a rolling into a new unit trimming older window rows: one group
        leaves what committing each rolling in turn leaves, and answers the same."""
        before = messages(2, "before")
        a, b, c, d = messages(3, "a"), messages(2, "b"), messages(4, "c"), messages(1, "d")
        planned = [
            rolling("h", a, timestamp=2_000, slice_id="s-a"),
            rolling("h", b, timestamp=3_000, idle=True, last_interaction=2_500,
                    new_session_id="u2", slice_id="s-b"),
            rolling("h", [], timestamp=4_000, idle=True, last_interaction=3_500,
                    new_session_id="u3", slice_id="s-none"),
            rolling("h", c, timestamp=5_000, slice_id="s-c", drop=[before[0].id]),
            rolling("h", d, timestamp=6_000, idle=True, last_interaction=5_500,
                    new_session_id="u4", slice_id="s-d"),
        ]  # fmt: skip
        answers: dict[str, list[CommittedRolling]] = {}
        for namespace in ("in-turn", "grouped"):
            store.ensure_namespace(namespace, "u1")
            store.append_trajectory(namespace, before, AppendOptions(last_interaction=1_000))
            _leased(store, namespace)
            store.commit_rolling(namespace, rolling("h", before, slice_id="s-0"))
            if namespace == "in-turn":
                answers[namespace] = []
                for commit in planned:
                    _leased(store, namespace)
                    answers[namespace].append(store.commit_rolling(namespace, commit))
            else:
                _leased(store, namespace)
                steps = [ReplayStep([], None, rolling=commit) for commit in planned]
                answers[namespace] = store.commit_replay(namespace, "h", steps)
        assert answers["grouped"] == answers["in-turn"]
        assert [a.seq for a in answers["grouped"]] == [2, 3, None, 4, 5]
        shapes = [_shape(store, namespace) for namespace in ("in-turn", "grouped")]
        assert shapes[0] == shapes[1]
        newest = store.list_units("grouped", UnitQuery(limit=100))[0]
        assert shapes[1][0] == ("u4", 2, 5)  # b closes u1, the quiet with nothing new skips u2
        assert (newest.id, newest.timestamp, newest.message_count) == ("u3", 6_000, 5)
        assert store.rolling_holder("grouped") is None

    def test_a_replay_refuses_a_message_stored_before_or_by_itself(
        self, store: MemoryStore
    ) -> None:
        store.ensure_namespace("ns", "s")
        stored = _rolled(store, "ns", 2, "stored")
        new, twice = messages(2, "new"), messages(1, "twice")
        for group in (
            [rolling("h", new), rolling("h", [stored[1], *twice])],
            [rolling("h", [*new, *twice]), rolling("h", twice)],
        ):
            _leased(store, "ns")
            steps = [ReplayStep([], None, rolling=commit) for commit in group]
            with pytest.raises(ConflictError, match="already stored"):
                store.commit_replay("ns", "h", steps)
            store.release_rolling("ns", "h")
        assert store.log_head("ns") == 1
        assert [m.id for m in store.read_messages("ns", "s", 0, 10)] == [m.id for m in stored]

    def test_a_replay_is_all_or_nothing(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "s")
        said = messages(2)
        _leased(store, "ns")
        steps = [
            ReplayStep(said, 10, rolling=rolling("h", said[:1])),
            ReplayStep([], None, rolling=rolling("someone-else", said[1:])),
        ]
        with pytest.raises(ConflictError):
            store.commit_replay("ns", "h", steps)
        assert store.unit_ids("ns") == []
        assert store.trajectory_length("ns") == 0
        assert store.rolling_holder("ns") == "h"
        with pytest.raises(ConflictError, match="lease"):
            store.commit_replay("ns", "not-the-holder", [ReplayStep(said, 10)])

    def test_a_follower_moves_on_one_rolling_at_a_time(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "s")
        _rolled(store, "ns", 2, "a")
        _rolled(store, "ns", 2, "b")
        assert store.lagging_namespaces("indexer") == ["ns"]
        first = LogFollower(store).round("indexer", "ns", _none)
        assert first is not None
        assert first.seq == 1
        assert store.consumer_position("indexer", "ns").position == 1
        (status,) = store.consumer_status("ns")
        assert (status.name, status.durable, status.position, status.head) == (
            "indexer",
            True,
            1,
            2,
        )
        second = LogFollower(store).round("indexer", "ns", _none, batch=10)
        assert second is not None
        assert second.seq == 2
        assert LogFollower(store).round("indexer", "ns", _none) is None
        assert store.lagging_namespaces("indexer") == []
        assert store.lagging_namespaces("someone-new") == ["ns"]
        with pytest.raises(NotFoundError):
            LogFollower(store).round("indexer", "ghost", _none)

    def test_a_consumer_advances_only_from_where_it_is_expected(self, store: MemoryStore) -> None:
        """The one conditional write: staged rows and the new position, if the consumer
        is still where the caller read it (else ConflictError, nothing written)."""
        store.ensure_namespace("ns", "s")
        _rolled(store, "ns", 1, "a")
        _rolled(store, "ns", 1, "b")
        at = store.consumer_position("c", "ns")
        assert at.position == 0
        first, second = store.read_log("ns", 0)
        store.advance_consumer("c", "ns", at, [(first, [])])
        moved = store.consumer_position("c", "ns")
        assert (moved.position, moved.generation) == (1, at.generation)
        with pytest.raises(ConflictError):  # another process got there first
            store.advance_consumer("c", "ns", at, [(first, [])])
        assert store.consumer_position("c", "ns") == moved
        stale = FollowerPosition(moved.position, moved.generation + 1)
        with pytest.raises(ConflictError):  # the rollings changed since they were read
            store.advance_consumer("c", "ns", stale, [(second, [])])
        store.advance_consumer("c", "ns", moved, [(second, [])])
        assert store.consumer_position("c", "ns").position == 2
        assert store.lagging_namespaces("c") == []
        with pytest.raises(NotFoundError):
            store.consumer_position("c", "ghost")

    def test_a_failing_follower_writes_nothing_and_stays(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "s")
        _rolled(store, "ns", 1, "a")
        _rolled(store, "ns", 1, "b")

        def half(entry: LogEntry) -> Sequence[Staged]:
            if entry.seq == 2:
                raise RuntimeError("down")
            return []

        with pytest.raises(RuntimeError):
            LogFollower(store).round("c", "ns", half, batch=2)
        assert store.consumer_position("c", "ns").position == 0
        assert store.lagging_namespaces("c") == ["ns"]

        def wrong(entry: LogEntry) -> Any:  # what a careless consumer returns
            return ["not a write"]

        with pytest.raises(InvalidInputError, match="Record"):
            LogFollower(store).round("c", "ns", wrong)
        assert store.consumer_position("c", "ns").position == 0

    def test_prepare_sees_the_rollings_before_the_transaction(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "s")
        _rolled(store, "ns", 1, "a")
        _rolled(store, "ns", 1, "b")
        prepared: list[int] = []

        def prepare(entries: Sequence[LogEntry]) -> None:
            store.ensure_namespace("written-while-preparing", "s")  # no lock is held
            prepared.extend(e.seq for e in entries)

        last = LogFollower(store).round("c", "ns", _none, batch=5, prepare=prepare)
        assert last is not None
        assert last.seq == 2
        assert prepared == [1, 2]
        assert store.consumer_position("c", "ns").position == 2
        assert LogFollower(store).round("c", "ns", _none, prepare=prepare) is None
        assert prepared == [1, 2]

    def test_prepare_looks_ahead_of_what_is_applied(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "s")
        for tag in "abcde":
            _rolled(store, "ns", 1, tag)
        prepared: list[list[int]] = []

        def prepare(entries: Sequence[LogEntry]) -> None:
            prepared.append([e.seq for e in entries])

        last = LogFollower(store).round("c", "ns", _none, batch=2, prepare=prepare, lookahead=4)
        assert last is not None
        assert last.seq == 2
        assert store.consumer_position("c", "ns").position == 2
        last = LogFollower(store).round("c", "ns", _none, batch=2, prepare=prepare, lookahead=4)
        assert last is not None
        assert last.seq == 4
        # a lookahead shorter than the batch still shows the batch
        last = LogFollower(store).round("c", "ns", _none, batch=2, prepare=prepare, lookahead=1)
        assert last is not None
        assert last.seq == 5
        assert prepared == [[1, 2, 3, 4], [3, 4, 5], [5]]

    def test_consumer_failures_are_counted(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "s")
        store.record_consumer_failure("hook", "ns", durable=False, error="first", at=5)
        store.record_consumer_failure("hook", "ns", durable=False, error="second", at=9)
        (status,) = store.consumer_status("ns")
        assert (status.name, status.durable, status.failures) == ("hook", False, 2)
        assert (status.last_error, status.last_failure_at, status.position) == ("second", 9, 0)
        with pytest.raises(NotFoundError):
            store.record_consumer_failure("hook", "ghost", durable=False, error="x", at=1)


class RecordContract:
    """`RecordStore`: a durable consumer's own records, written with its position."""

    def test_records_are_written_with_the_position_or_not_at_all(self, store: MemoryStore) -> None:
        offers(store, RecordStore)
        assert isinstance(store, RecordStore)
        store.ensure_namespace("ns", "s")
        _rolled(store, "ns", 2, "a")
        _rolled(store, "ns", 2, "b")
        at = store.consumer_position("c", "ns")
        first, second = store.read_log("ns", 0)

        def down(entry: LogEntry) -> Sequence[Staged]:
            raise RuntimeError("down")

        with pytest.raises(RuntimeError):
            LogFollower(store).round("c", "ns", down)
        assert store.read_records("ns", RecordQuery("c")) == []
        store.advance_consumer("c", "ns", at, [(first, _record_seq(first))])
        with pytest.raises(ConflictError):  # another process got there first: nothing written
            store.advance_consumer("c", "ns", at, [(second, _record_seq(second))])
        (record,) = store.read_records("ns", RecordQuery("c"))
        assert (record.key, record.value) == ("seq-0001", {"seq": 1, "unit": "s"})
        assert LogFollower(store).round("c", "ns", _record_seq) is not None
        assert [r.key for r in store.read_records("ns", RecordQuery("c"))] == [
            "seq-0001",
            "seq-0002",
        ]

    def test_records_replace_delete_and_page_by_key(self, store: MemoryStore) -> None:
        offers(store, RecordStore)
        assert isinstance(store, RecordStore)
        store.ensure_namespace("ns", "s")
        for tag in "abc":
            _rolled(store, "ns", 1, tag)
        values: list[object] = [{"x": [1, 2.5, None, True]}, "text 中文 🎉", 3]

        def staged(entry: LogEntry) -> Sequence[Staged]:
            writes: list[Staged] = [Record(f"k/{entry.seq}", values[entry.seq - 1])]
            writes.append(Record("latest", entry.seq))  # a key written again is replaced
            if entry.seq == 3:
                writes.append(Unrecord("k/2"))
                writes.append(Unrecord("never-written"))
            return writes

        while LogFollower(store).round("c", "ns", staged) is not None:
            pass
        got = {r.key: r.value for r in store.read_records("ns", RecordQuery("c"))}
        assert got == {"k/1": values[0], "k/3": 3, "latest": 3}
        assert [r.key for r in store.read_records("ns", RecordQuery("c", prefix="k/"))] == [
            "k/1",
            "k/3",
        ]
        assert [
            r.key for r in store.read_records("ns", RecordQuery("c", after="k/1", limit=1))
        ] == ["k/3"]
        assert store.read_records("ns", RecordQuery("other")) == []
        with pytest.raises(NotFoundError):
            store.read_records("ghost", RecordQuery("c"))


def _shape(store: MemoryStore, namespace: str) -> list[object]:
    """What a namespace holds, but its name: header, units, log, window."""
    info = store.get_namespace(namespace)
    assert info is not None
    units = [
        (
            u.id,
            u.timestamp,
            u.message_count,
            u.slice_count,
            [m.id for m in store.read_messages(namespace, u.id, 0, u.message_count)],
            store.read_slices(namespace, u.id),
        )
        for u in store.list_units(namespace, UnitQuery(limit=100))
    ]
    log = [
        (e.seq, e.unit, e.slice, [m.id for m in e.messages], e.idle, e.rolling_size,
         e.retain_divisor)
        for e in store.read_log(namespace, 0)
    ]  # fmt: skip
    window = store.load_trajectory(namespace)
    return [
        (info.memory_session_id, info.unit_count, info.slice_count),
        units,
        log,
        ([m.id for m in window.messages], window.interactions, window.idle_rolled_for),
    ]
