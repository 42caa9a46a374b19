"""The units layer (`UnitStore`): namespaces, units, messages and slices."""

from __future__ import annotations

from fnmatch import fnmatchcase

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from partner_memory.errors import ConflictError, NotFoundError, StorageUnavailableError
from partner_memory.model import MemorySlice, Message, NamespaceInfo
from partner_memory.store.contract.base import (
    BulkWrite,
    MemoryStore,
    NewSlice,
    UnitQuery,
    UnitWrite,
)
from partner_memory.store.contract.capabilities import InspectionStore, NamespaceQuery
from partner_memory.testing.helpers import held, messages

#: Names whose characters mean something to a glob, to LIKE or to a regex.
NAMES = [
    "a",
    "a-b",
    "a/b",
    "a/b/c",
    "A",
    "a.b",
    "a%b",
    "a_b",
    "a[b]",
    "a\\b",
    "a-",
    "-",
    "é",
    "ab",
    "b",
]


class UnitContract:
    """Every verb of `UnitStore`."""

    def test_a_store_says_where_it_is_and_what_it_offers(self, store: MemoryStore) -> None:
        assert isinstance(store.url, str)
        assert store.url
        assert store.read_only is False
        assert isinstance(store.capabilities, frozenset)

    def test_messages_are_found_by_id_and_units_by_prefix(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "unit-a1")
        said = messages(2)
        store.append("ns", said, NewSlice("s", "s", 1))
        for unit, at in (("unit-a2", 2), ("unit-b", 3)):
            store.set_session("ns", unit)
            store.append("ns", messages(1, unit), NewSlice("s", "s", at))
        assert store.find_messages("ns", [said[1].id, "nope"]) == {said[1].id: said[1]}
        assert store.stored_message_ids("ns", [said[0].id, "nope"]) == {said[0].id}
        assert store.unit_ids_starting("ns", "unit-a", limit=10) == ["unit-a1", "unit-a2"]
        assert store.unit_ids_starting("ns", "unit-a", limit=1) == ["unit-a1"]
        assert store.unit_ids_starting("ns", "Unit", limit=10) == []  # case-sensitive
        assert store.unit_ids("ns") == ["unit-a1", "unit-a2", "unit-b"]
        for read in (store.find_messages, store.stored_message_ids):
            with pytest.raises(NotFoundError):
                read("ghost", [said[0].id])

    def test_a_closed_store_refuses_work_and_closes_again(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "s")
        store.close()
        with pytest.raises(StorageUnavailableError):
            store.list_namespaces()
        store.close()  # a second close (the fixture's) is no error

    def test_ensure_namespace_creates_once_and_keeps_session(self, store: MemoryStore) -> None:
        first = store.ensure_namespace("agent-a", "s1")
        again = store.ensure_namespace("agent-a", "s2")
        assert first.memory_session_id == again.memory_session_id == "s1"
        assert store.get_namespace("agent-a") == first
        assert store.get_namespace("nobody") is None

    def test_list_namespaces_sorted_with_unit_counts(self, store: MemoryStore) -> None:
        store.ensure_namespace("b", "sb")
        store.ensure_namespace("a", "sa")
        store.append("a", messages(2), NewSlice("sl", "x", 5))
        listed = store.list_namespaces()
        assert [(n.name, n.unit_count) for n in listed] == [("a", 1), ("b", 0)]

    def test_namespaces_page_by_name_and_keep_their_counts(self, store: MemoryStore) -> None:
        """Counts are kept as units and slices are written (appends, bulk writes, copies),
        so listing namespaces never counts a namespace's units."""
        for name in ("c", "a", "d", "b"):
            store.ensure_namespace(name, f"s-{name}")
        store.append("a", messages(2), NewSlice("sl1", "x", 5))
        store.append("a", messages(2, "n"), NewSlice("sl2", "y", 6))
        store.set_session("a", "s-a2")
        store.append("a", messages(1, "o"), NewSlice("sl3", "z", 7))
        store.write_units(
            "b",
            BulkWrite(
                "s-b", [UnitWrite("w", 9, 0, messages(2, "w"), [MemorySlice("ws", 0, 2, "w", 9)])]
            ),
        )
        first = store.list_namespaces(limit=2)
        rest = store.list_namespaces(after=first[-1].name, limit=10)
        assert [n.name for n in first + rest] == ["a", "b", "c", "d"]
        assert [(n.unit_count, n.slice_count) for n in first] == [(2, 3), (1, 1)]
        assert store.count_namespaces() == 4
        assert store.count_units("a") == 2
        assert [s.id for _, s in store.recent_slices("a", 2)] == ["sl3", "sl2"]

    def test_namespaces_matching_a_key_glob_are_listed_counted_and_paged(
        self,
        store: MemoryStore,
    ) -> None:
        """A key's glob filters inside the query: pages are full, counts are the key's own."""
        for name in ["agent-41/x", *(f"agent-42/{i:02d}" for i in range(5)), "agent-420", "b"]:
            store.ensure_namespace(name, "s")
        first = store.list_namespaces(limit=2, matching="agent-42/*")
        rest = store.list_namespaces(limit=10, after=first[-1].name, matching="agent-42/*")
        assert [n.name for n in first + rest] == [f"agent-42/{i:02d}" for i in range(5)]
        assert store.count_namespaces(matching="agent-42/*") == 5
        assert store.count_namespaces(matching="nobody-*") == 0
        assert store.count_namespaces() == 8
        if isinstance(store, InspectionStore):
            overviews = store.namespace_overviews(
                NamespaceQuery(limit=10, matching="agent-4[!2]*", search="X")
            )
            assert [o.name for o in overviews] == ["agent-41/x"]

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(pattern=st.text(alphabet="ab-/*?[]!%_\\.é", max_size=8))
    def test_a_glob_matches_in_the_store_as_fnmatch_does(
        self, store: MemoryStore, pattern: str
    ) -> None:
        for name in NAMES:
            store.ensure_namespace(name, "s")
        expected = sorted(n for n in NAMES if fnmatchcase(n, pattern))
        assert [n.name for n in store.list_namespaces(matching=pattern)] == expected
        assert store.count_namespaces(matching=pattern) == len(expected)

    def test_append_creates_unit_of_current_session(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "session-1")
        update = store.append("ns", messages(3), NewSlice("slice-1", "three", 100))
        assert update.unit.id == "session-1"
        assert update.unit.message_count == 3
        assert update.slice == MemorySlice("slice-1", 0, 3, "three", 100)
        update = store.append("ns", messages(2, "n"), NewSlice("slice-2", "two", 200))
        assert (update.slice.start_index, update.slice.end_index) == (3, 5)
        assert store.get_unit("ns", "session-1") == update.unit
        assert [m.content for m in store.read_messages("ns", "session-1", 2, 4)] == ["m-2", "n-0"]

    def test_append_to_unknown_namespace_is_not_found(self, store: MemoryStore) -> None:
        with pytest.raises(NotFoundError, match="ghost"):
            store.append("ghost", messages(1), NewSlice("s", "x", 1))
        assert store.get_namespace("ghost") is None

    def test_set_session_switches_unit(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "one")
        store.append("ns", messages(1), NewSlice("a", "a", 1))
        store.set_session("ns", "two")
        store.append("ns", messages(1), NewSlice("b", "b", 2))
        assert store.unit_ids("ns") == ["one", "two"]
        with pytest.raises(NotFoundError):
            store.set_session("ghost", "x")

    def test_duplicate_slice_id_in_unit_is_conflict_and_rolls_back(
        self, store: MemoryStore
    ) -> None:
        store.ensure_namespace("ns", "u")
        store.append("ns", messages(2), NewSlice("same", "a", 1))
        with pytest.raises(ConflictError):
            store.append("ns", messages(3), NewSlice("same", "b", 2))
        info = store.get_unit("ns", "u")
        assert info is not None
        assert (info.message_count, info.slice_count) == (2, 1)
        assert len(store.read_messages("ns", "u", 0, 100)) == 2

    def test_messages_round_trip_exactly(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "u")
        originals = [
            Message(role="user", content=""),
            Message(role="assistant", content="中文，emoji 🎉👩‍👩‍👧, tabs\tand\nnewlines"),
            Message(role="system", content="x" * 1_000_000, timestamp=1_683_553_000_000),
            Message(
                role="user",
                content="with metadata",
                id="D1:3",
                metadata={"speaker": "Caroline", "dia_id": "D1:3", "n": [1, 2.5, None, True]},
            ),
        ]
        store.append("ns", originals, NewSlice("s", "s", 1))
        assert store.read_messages("ns", "u", 0, 10) == originals

    def test_reads_of_unknown_ids_return_nothing_and_create_nothing(
        self, store: MemoryStore
    ) -> None:
        store.ensure_namespace("ns", "u")
        assert store.get_unit("ns", "nope") is None
        assert store.get_unit("other-ns", "u") is None
        assert store.read_messages("ns", "nope", 0, 10) == []
        assert store.read_slices("ns", "nope") == []
        assert store.get_slice("ns", "nope", "s") is None
        assert store.unit_ids("ns") == []
        with pytest.raises(NotFoundError):
            store.list_units("ghost", UnitQuery(limit=10))

    def test_slices_order_by_timestamp(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "u")
        store.write_units(
            "ns",
            BulkWrite(
                "u",
                [
                    UnitWrite(
                        "u",
                        9,
                        0,
                        messages(4),
                        [MemorySlice("late", 2, 4, "b", 9), MemorySlice("early", 0, 2, "a", 3)],
                    )
                ],
            ),
        )
        assert [s.id for s in store.read_slices("ns", "u")] == ["early", "late"]
        assert store.get_slice("ns", "u", "late") == MemorySlice("late", 2, 4, "b", 9)

    def test_list_units_newest_first_paged_and_time_filtered(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "u0")
        for i in range(5):
            store.set_session("ns", f"u{i}")
            store.append("ns", messages(1), NewSlice(f"s{i}", "s", 1000 * (i + 1)))
        assert [u.id for u in store.list_units("ns", UnitQuery(limit=2))] == ["u4", "u3"]
        assert [u.id for u in store.list_units("ns", UnitQuery(limit=2, offset=2))] == ["u2", "u1"]
        assert [
            u.id for u in store.list_units("ns", UnitQuery(limit=10, since=2000, until=4000))
        ] == [
            "u2",
            "u1",
        ]
        assert store.count_units("ns") == 5
        assert store.count_units("ns", since=2000, until=4000) == 2

    def test_write_units_is_all_or_nothing(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "before")
        store.append("ns", messages(2), NewSlice("x", "x", 1))
        good = UnitWrite("new-unit", 5, 0, messages(3), [MemorySlice("a", 0, 3, "a", 5)])
        stale = UnitWrite("before", 5, 1, messages(1), [])  # store holds 2, not 1
        with pytest.raises(ConflictError, match="before"):
            store.write_units("ns", BulkWrite("after", [good, stale]))
        assert store.get_unit("ns", "new-unit") is None
        assert held(store.get_namespace("ns")).memory_session_id == "before"

    def test_write_units_into_a_new_namespace_is_all_or_nothing(self, store: MemoryStore) -> None:
        good = UnitWrite("a", 5, 0, messages(1), [])
        stale = UnitWrite("a", 5, 3, messages(1), [])  # "a" holds 1 message by then, not 3
        with pytest.raises(ConflictError):
            store.write_units("fresh", BulkWrite("s", [good, stale]))
        assert store.get_namespace("fresh") is None
        store.write_units("fresh", BulkWrite("s", [good], trajectory=messages(2, "window")))
        assert store.get_namespace("fresh") == NamespaceInfo("fresh", "s", 1, 0)
        assert [m.content for m in store.load_trajectory("fresh").messages] == [
            "window-0",
            "window-1",
        ]

    def test_write_units_extends_existing_unit(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "u")
        store.append("ns", messages(2), NewSlice("x", "x", 1))
        store.write_units("ns", BulkWrite("u", [UnitWrite("u", 7, 2, messages(1, "more"), [])]))
        info = store.get_unit("ns", "u")
        assert info is not None
        assert (info.message_count, info.slice_count, info.timestamp) == (3, 1, 7)
        assert store.read_messages("ns", "u", 2, 3)[0].content == "more-0"

    def test_namespaces_are_isolated(self, store: MemoryStore) -> None:
        store.ensure_namespace("alice", "shared-id")
        store.ensure_namespace("bob", "shared-id")
        store.append("alice", messages(2, "alice"), NewSlice("same", "a", 1))
        store.append("bob", messages(1, "bob"), NewSlice("same", "b", 1))
        assert [m.content for m in store.read_messages("alice", "shared-id", 0, 9)] == [
            "alice-0",
            "alice-1",
        ]
        assert [m.content for m in store.read_messages("bob", "shared-id", 0, 9)] == ["bob-0"]
        assert held(store.get_slice("bob", "shared-id", "same")).summary == "b"
        store.set_session("alice", "new")
        assert held(store.get_namespace("bob")).memory_session_id == "shared-id"

    def test_append_refuses_a_message_already_stored(self, store: MemoryStore) -> None:
        """No interleaving can store a message twice: the append checks inside its transaction."""
        from partner_memory.core import MemoryCore
        from partner_memory.errors import InvalidInputError

        core = MemoryCore(store, "ns")
        once = Message(role="user", content="once")
        core.update_memory_unit([once], "first")
        core.refresh_memory_session()
        with pytest.raises(ConflictError, match=once.id):
            core.update_memory_unit([Message(role="user", content="new"), once], "again")
        twin = Message(role="user", content="twin")
        with pytest.raises(InvalidInputError, match="twice"):
            core.update_memory_unit([twin, twin], "twins")
        assert [u.message_count for u in core.list_units().units] == [1]

    def test_out_of_range_integers_are_invalid_input_on_every_backend(
        self, store: MemoryStore
    ) -> None:
        """Bad input never looks like an outage (which a client would retry)."""
        from partner_memory.errors import InvalidInputError

        store.ensure_namespace("ns", "s")
        with pytest.raises(InvalidInputError):
            store.list_units("ns", UnitQuery(limit=10, offset=2**70))
        with pytest.raises(InvalidInputError):
            store.list_units("ns", UnitQuery(limit=2**70))

    def test_unit_pages_by_offset_from_either_end_and_by_key(self, store: MemoryStore) -> None:
        """Every page equals the slice of the whole list, whether it is read from the newest
        end, from the oldest end (offsets past the middle) or after a unit (keyset)."""
        from partner_memory.core import MemoryCore

        store.ensure_namespace("ns", "u00")
        for u in range(25):
            store.set_session("ns", f"u{u:02d}")
            store.append("ns", messages(1, f"u{u}"), NewSlice(f"s{u}", "s", 1000 + u // 3))
        core = MemoryCore(store, "ns", create=False)
        everything = [u.id for u in store.list_units("ns", UnitQuery(limit=1000))]
        assert len(everything) == 25
        for since in (None, 1003):
            whole = [u.id for u in store.list_units("ns", UnitQuery(limit=1000, since=since))]
            for offset in range(len(whole) + 2):
                page = core.list_units(limit=7, offset=offset, since=since)
                assert [u.id for u in page.units] == whole[offset : offset + 7], (since, offset)
                assert page.total == len(whole)
            walked, after = [], None
            while True:
                page = core.list_units(limit=4, after=after, since=since)
                walked += [u.id for u in page.units]
                if page.next_after is None:
                    break
                after = page.next_after
            assert walked == whole
            assert core.list_units(limit=7, offset=len(whole) - 7, since=since).next_after is None
            assert core.list_units(limit=7, offset=len(whole) - 8, since=since).next_after
        with pytest.raises(NotFoundError, match="'nope'"):
            core.list_units(after="nope")
        from partner_memory.errors import InvalidInputError

        with pytest.raises(InvalidInputError, match="either after or offset"):
            core.list_units(after=everything[0], offset=3)

    def test_excerpts_read_only_the_range_and_the_slices_over_it(self, store: MemoryStore) -> None:
        """A recall hit deep in a large unit costs its own rows, not the unit's."""
        from partner_memory.model import new_id

        batch = messages(30)
        slices = [MemorySlice(new_id(), s, s + 10, f"part {s}", 1_000 + s) for s in (0, 10, 20)]
        store.ensure_namespace("agent", new_id())
        store.write_units("agent", BulkWrite("u1", [UnitWrite("u1", 1_000, 0, batch, slices)]))
        [(rows, held)] = store.read_excerpts("agent", [("u1", 12, 14)])
        assert [m.id for m in rows] == [m.id for m in batch[12:14]]
        assert [s.summary for s in held] == ["part 10"]
        [(rows, held)] = store.read_excerpts("agent", [("u1", 9, 21)])
        assert [s.summary for s in held] == ["part 0", "part 10", "part 20"]
        assert store.read_excerpts("agent", [("nope", 0, 1)]) == [([], [])]
