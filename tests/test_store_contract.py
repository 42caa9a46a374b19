"""The store contract, run unchanged against every backend (SQLite file, PostgreSQL)."""

from __future__ import annotations

from fnmatch import fnmatchcase

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from partner_memory.errors import ConflictError, NotFoundError
from partner_memory.model import MemorySlice, Message
from partner_memory.store import MemoryStore, UnitWrite, open_store
from tests.helpers import messages


def test_store_satisfies_protocol(store: MemoryStore) -> None:
    assert isinstance(store, MemoryStore)


def test_ensure_namespace_creates_once_and_keeps_session(store: MemoryStore) -> None:
    first = store.ensure_namespace("agent-a", "s1")
    again = store.ensure_namespace("agent-a", "s2")
    assert first.memory_session_id == again.memory_session_id == "s1"
    assert store.get_namespace("agent-a") == first
    assert store.get_namespace("nobody") is None


def test_list_namespaces_sorted_with_unit_counts(store: MemoryStore) -> None:
    store.ensure_namespace("b", "sb")
    store.ensure_namespace("a", "sa")
    store.append("a", messages(2), "x", slice_id="sl", timestamp=5)
    listed = store.list_namespaces()
    assert [(n.name, n.unit_count) for n in listed] == [("a", 1), ("b", 0)]


def test_namespaces_page_by_name_and_keep_their_counts(store: MemoryStore) -> None:
    """Counts are kept as units and slices are written (appends, bulk writes, copies),
    so listing namespaces never counts a namespace's units."""
    for name in ("c", "a", "d", "b"):
        store.ensure_namespace(name, f"s-{name}")
    store.append("a", messages(2), "x", slice_id="sl1", timestamp=5)
    store.append("a", messages(2, "n"), "y", slice_id="sl2", timestamp=6)
    store.set_session("a", "s-a2")
    store.append("a", messages(1, "o"), "z", slice_id="sl3", timestamp=7)
    store.write_units(
        "b",
        "s-b",
        [UnitWrite("w", 9, 0, messages(2, "w"), [MemorySlice("ws", 0, 2, "w", 9)])],
    )
    first = store.list_namespaces(limit=2)
    rest = store.list_namespaces(after=first[-1].name, limit=10)
    assert [n.name for n in first + rest] == ["a", "b", "c", "d"]
    assert [(n.unit_count, n.slice_count) for n in first] == [(2, 3), (1, 1)]
    assert store.count_namespaces() == 4
    assert store.count_units("a") == 2
    assert [s.id for _, s in store.recent_slices("a", 2)] == ["sl3", "sl2"]


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


def test_namespaces_matching_a_key_glob_are_listed_counted_and_paged(
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
    overviews = store.namespace_overviews(limit=10, matching="agent-4[!2]*", search="X")
    assert [o.name for o in overviews] == ["agent-41/x"]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(pattern=st.text(alphabet="ab-/*?[]!%_\\.é", max_size=8))
def test_a_glob_matches_in_the_store_as_fnmatch_does(store: MemoryStore, pattern: str) -> None:
    for name in NAMES:
        store.ensure_namespace(name, "s")
    expected = sorted(n for n in NAMES if fnmatchcase(n, pattern))
    assert [n.name for n in store.list_namespaces(matching=pattern)] == expected
    assert store.count_namespaces(matching=pattern) == len(expected)


def test_append_creates_unit_of_current_session(store: MemoryStore) -> None:
    store.ensure_namespace("ns", "session-1")
    update = store.append("ns", messages(3), "three", slice_id="slice-1", timestamp=100)
    assert update.unit.id == "session-1"
    assert update.unit.message_count == 3
    assert update.slice == MemorySlice("slice-1", 0, 3, "three", 100)
    update = store.append("ns", messages(2, "n"), "two", slice_id="slice-2", timestamp=200)
    assert (update.slice.start_index, update.slice.end_index) == (3, 5)
    assert store.get_unit("ns", "session-1") == update.unit
    assert [m.content for m in store.read_messages("ns", "session-1", 2, 4)] == ["m-2", "n-0"]


def test_append_to_unknown_namespace_is_not_found(store: MemoryStore) -> None:
    with pytest.raises(NotFoundError, match="ghost"):
        store.append("ghost", messages(1), "x", slice_id="s", timestamp=1)
    assert store.get_namespace("ghost") is None


def test_set_session_switches_unit(store: MemoryStore) -> None:
    store.ensure_namespace("ns", "one")
    store.append("ns", messages(1), "a", slice_id="a", timestamp=1)
    store.set_session("ns", "two")
    store.append("ns", messages(1), "b", slice_id="b", timestamp=2)
    assert store.unit_ids("ns") == ["one", "two"]
    with pytest.raises(NotFoundError):
        store.set_session("ghost", "x")


def test_duplicate_slice_id_in_unit_is_conflict_and_rolls_back(store: MemoryStore) -> None:
    store.ensure_namespace("ns", "u")
    store.append("ns", messages(2), "a", slice_id="same", timestamp=1)
    with pytest.raises(ConflictError):
        store.append("ns", messages(3), "b", slice_id="same", timestamp=2)
    info = store.get_unit("ns", "u")
    assert info is not None
    assert (info.message_count, info.slice_count) == (2, 1)
    assert len(store.read_messages("ns", "u", 0, 100)) == 2


def test_messages_round_trip_exactly(store: MemoryStore) -> None:
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
    store.append("ns", originals, "s", slice_id="s", timestamp=1)
    assert store.read_messages("ns", "u", 0, 10) == originals


def test_reads_of_unknown_ids_return_nothing_and_create_nothing(store: MemoryStore) -> None:
    store.ensure_namespace("ns", "u")
    assert store.get_unit("ns", "nope") is None
    assert store.get_unit("other-ns", "u") is None
    assert store.read_messages("ns", "nope", 0, 10) == []
    assert store.read_slices("ns", "nope") == []
    assert store.get_slice("ns", "nope", "s") is None
    assert store.unit_ids("ns") == []
    with pytest.raises(NotFoundError):
        store.list_units("ghost", limit=10)


def test_slices_order_by_timestamp(store: MemoryStore) -> None:
    store.ensure_namespace("ns", "u")
    store.write_units(
        "ns",
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
    )
    assert [s.id for s in store.read_slices("ns", "u")] == ["early", "late"]
    assert store.get_slice("ns", "u", "late") == MemorySlice("late", 2, 4, "b", 9)


def test_list_units_newest_first_paged_and_time_filtered(store: MemoryStore) -> None:
    store.ensure_namespace("ns", "u0")
    for i in range(5):
        store.set_session("ns", f"u{i}")
        store.append("ns", messages(1), "s", slice_id=f"s{i}", timestamp=1000 * (i + 1))
    assert [u.id for u in store.list_units("ns", limit=2)] == ["u4", "u3"]
    assert [u.id for u in store.list_units("ns", limit=2, offset=2)] == ["u2", "u1"]
    assert [u.id for u in store.list_units("ns", limit=10, since=2000, until=4000)] == ["u2", "u1"]
    assert store.count_units("ns") == 5
    assert store.count_units("ns", since=2000, until=4000) == 2


def test_write_units_is_all_or_nothing(store: MemoryStore) -> None:
    store.ensure_namespace("ns", "before")
    store.append("ns", messages(2), "x", slice_id="x", timestamp=1)
    good = UnitWrite("new-unit", 5, 0, messages(3), [MemorySlice("a", 0, 3, "a", 5)])
    stale = UnitWrite("before", 5, 1, messages(1), [])  # store holds 2, not 1
    with pytest.raises(ConflictError, match="before"):
        store.write_units("ns", "after", [good, stale])
    assert store.get_unit("ns", "new-unit") is None
    assert store.get_namespace("ns").memory_session_id == "before"  # type: ignore[union-attr]


def test_write_units_extends_existing_unit(store: MemoryStore) -> None:
    store.ensure_namespace("ns", "u")
    store.append("ns", messages(2), "x", slice_id="x", timestamp=1)
    store.write_units("ns", "u", [UnitWrite("u", 7, 2, messages(1, "more"), [])])
    info = store.get_unit("ns", "u")
    assert info is not None
    assert (info.message_count, info.slice_count, info.timestamp) == (3, 1, 7)
    assert store.read_messages("ns", "u", 2, 3)[0].content == "more-0"


def test_namespaces_are_isolated(store: MemoryStore) -> None:
    store.ensure_namespace("alice", "shared-id")
    store.ensure_namespace("bob", "shared-id")
    store.append("alice", messages(2, "alice"), "a", slice_id="same", timestamp=1)
    store.append("bob", messages(1, "bob"), "b", slice_id="same", timestamp=1)
    assert [m.content for m in store.read_messages("alice", "shared-id", 0, 9)] == [
        "alice-0",
        "alice-1",
    ]
    assert [m.content for m in store.read_messages("bob", "shared-id", 0, 9)] == ["bob-0"]
    assert store.get_slice("bob", "shared-id", "same").summary == "b"  # type: ignore[union-attr]
    store.set_session("alice", "new")
    assert store.get_namespace("bob").memory_session_id == "shared-id"  # type: ignore[union-attr]


def test_data_survives_reopen(store_url: str) -> None:
    first = open_store(store_url)
    first.ensure_namespace("ns", "u")
    first.append("ns", messages(3), "kept", slice_id="s", timestamp=1)
    first.close()
    second = open_store(store_url)
    try:
        assert second.get_slice("ns", "u", "s") == MemorySlice("s", 0, 3, "kept", 1)
        assert len(second.read_messages("ns", "u", 0, 9)) == 3
    finally:
        second.close()


def test_migrations_are_recorded_and_idempotent(store_url: str) -> None:
    from partner_memory.store.sql import MIGRATIONS, SqlStore

    opened = open_store(store_url)
    assert isinstance(opened, SqlStore)
    try:
        assert opened.schema_version() == len(MIGRATIONS)
        assert opened.migrate() == len(MIGRATIONS)
    finally:
        opened.close()


def test_closed_store_refuses_work(store_url: str) -> None:
    from partner_memory.errors import StorageUnavailableError

    opened = open_store(store_url)
    opened.close()
    with pytest.raises(StorageUnavailableError):
        opened.list_namespaces()


def test_append_refuses_a_message_already_stored(store: MemoryStore) -> None:
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


def test_migration_steps_may_differ_per_backend() -> None:
    from partner_memory.store.dialect import POSTGRESQL, SQLITE
    from partner_memory.store.schema import MIGRATIONS, PerBackend, migration_steps

    statement = PerBackend(sqlite="CREATE VIRTUAL TABLE x USING fts5(a)", postgresql="")
    assert statement.for_dialect(SQLITE).startswith("CREATE VIRTUAL")
    assert statement.for_dialect(POSTGRESQL) == ""
    assert len(migration_steps(SQLITE)) == len(migration_steps(POSTGRESQL)) == len(MIGRATIONS)
    assert "GENERATED BY DEFAULT AS IDENTITY" in migration_steps(POSTGRESQL)[0][0]
    assert "{serial}" not in " ".join(migration_steps(SQLITE)[0])


def test_window_append_reports_length_and_refuses_without_writing(store: MemoryStore) -> None:
    """append_trajectory: one transaction; the new length back; bad input leaves it as it was."""
    from partner_memory.errors import InvalidInputError

    with pytest.raises(NotFoundError, match="nope"):
        store.append_trajectory("nope", messages(1), last_interaction=5)
    with pytest.raises(NotFoundError, match="nope"):
        store.append_trajectory("nope", messages(1))
    store.ensure_namespace("ns", "s")
    first = messages(3)
    assert store.append_trajectory("ns", first, last_interaction=7) == (3, None)
    assert store.append_trajectory("ns", messages(2, "more")) == (5, None)
    # the newest interaction before the appended one: what a quiet gap is measured from
    assert store.append_trajectory("ns", [], last_interaction=9) == (5, 7)
    with pytest.raises(InvalidInputError, match=first[1].id):
        store.append_trajectory("ns", [*messages(1, "new"), first[1]], last_interaction=9)
    state = store.load_trajectory("ns")
    assert (len(state.messages), state.last_interaction) == (5, 7)
    prompt = Message(role="user", content="<input>a task</input>")
    assert store.append_trajectory("ns", [prompt], structured={prompt.id}).length == 6
    assert store.append_trajectory("ns", messages(1, "turn"), drop_structured=True).length == 6
    assert prompt.id not in {m.id for m in store.load_trajectory("ns").messages}


def test_window_refuses_an_id_already_stored_in_a_unit(store: MemoryStore) -> None:
    """A reused id would be skipped by the next rolling and lost: it is refused at once."""
    from partner_memory.core import MemoryCore
    from partner_memory.errors import InvalidInputError

    core = MemoryCore(store, "ns")
    stored = Message(role="user", content="stored")
    core.update_memory_unit([stored], "s")
    again = Message(role="user", content="new words", id=stored.id)
    with pytest.raises(InvalidInputError, match=stored.id):
        store.append_trajectory("ns", [again], last_interaction=5)
    assert store.load_trajectory("ns").messages == []


def test_out_of_range_integers_are_invalid_input_on_every_backend(store: MemoryStore) -> None:
    """Bad input never looks like an outage (which a client would retry)."""
    from partner_memory.errors import InvalidInputError

    store.ensure_namespace("ns", "s")
    with pytest.raises(InvalidInputError):
        store.list_units("ns", limit=10, offset=2**70)
    with pytest.raises(InvalidInputError):
        store.list_units("ns", limit=2**70)


def test_messages_of_an_older_schema_are_found_by_id_after_migration(store_url: str) -> None:
    """Step 4 gives stored messages their lookup key in SQL; it must equal the key the
    code computes, or stored messages would look new (and be stored twice)."""
    from partner_memory.store.dialect import POSTGRESQL, SQLITE
    from partner_memory.store.schema import migration_steps
    from partner_memory.store.sql import SCHEMA_TABLE

    postgres = store_url.startswith("postgresql://")
    steps = migration_steps(POSTGRESQL if postgres else SQLITE)[:3]
    ids = ["plain", "ünïcødé 标识 🦜", "3f2b8c1e-7a4d-4e0b-9c51-0d2a6b7e8f10"]
    statements = [f"CREATE TABLE {SCHEMA_TABLE} (version INTEGER NOT NULL)"]
    statements += [s for step in steps for s in step]
    statements += [
        f"INSERT INTO {SCHEMA_TABLE} (version) VALUES (1), (2), (3)",
        "INSERT INTO namespaces (id, name, memory_session_id) VALUES (1, 'ns', 'u')",
        "INSERT INTO units (pk, namespace_id, unit_id, timestamp, message_count, slice_count)"
        " VALUES (1, 1, 'u', 5, 3, 0)",
    ]
    statements += [
        "INSERT INTO messages (unit_pk, position, message_id, role, content)"
        f" VALUES (1, {i}, '{m}', 'user', 'old {i}')"
        for i, m in enumerate(ids)
    ]
    if postgres:
        import psycopg

        with psycopg.connect(store_url, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement.encode())
    else:
        import sqlite3

        with sqlite3.connect(store_url) as conn:
            for statement in statements:
                conn.execute(statement)
    store = open_store(store_url)
    try:
        assert store.stored_message_ids("ns", [*ids, "absent"]) == set(ids)
        found = store.find_messages("ns", ids)
        assert sorted(m.content for m in found.values()) == ["old 0", "old 1", "old 2"]
    finally:
        store.close()


def test_unit_pages_by_offset_from_either_end_and_by_key(store: MemoryStore) -> None:
    """Every page equals the slice of the whole list, whether it is read from the newest
    end, from the oldest end (offsets past the middle) or after a unit (keyset)."""
    from partner_memory.core import MemoryCore

    store.ensure_namespace("ns", "u00")
    for u in range(25):
        store.set_session("ns", f"u{u:02d}")
        store.append("ns", messages(1, f"u{u}"), "s", slice_id=f"s{u}", timestamp=1000 + u // 3)
    core = MemoryCore(store, "ns", create=False)
    everything = [u.id for u in store.list_units("ns", limit=1000)]
    assert len(everything) == 25
    for since in (None, 1003):
        whole = [u.id for u in store.list_units("ns", limit=1000, since=since)]
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


def test_namespace_overviews_search_page_and_count(store: MemoryStore) -> None:
    from partner_memory import PartnerMemory

    for name in ["Agent-1", "agent-2", "bot_1", "bot%1"]:
        with PartnerMemory(store, name, idle_timer=False) as memory:
            memory.record_turn("hello there", "hi", timestamp=1_700_000_000_000)
            if name == "agent-2":
                memory.roll_now()
                memory.record_turn("later", "ok", timestamp=1_700_000_100_000)
    every = store.namespace_overviews(limit=10)
    assert [o.name for o in every] == ["Agent-1", "agent-2", "bot%1", "bot_1"]
    two = every[1]
    assert (two.unit_count, two.slice_count, two.rolling_count) == (1, 1, 1)
    assert two.message_count == 2  # rolled into the unit
    assert two.window_count >= 2  # the later turn (and what the rolling kept)
    assert two.last_activity is not None
    assert every[0].last_activity is not None
    assert every[0].unit_count == 0
    assert [o.name for o in store.namespace_overviews(limit=10, search="AGENT")] == [
        "Agent-1",
        "agent-2",
    ]
    assert [o.name for o in store.namespace_overviews(limit=10, search="_")] == ["bot_1"]
    assert [o.name for o in store.namespace_overviews(limit=10, search="%")] == ["bot%1"]
    assert [o.name for o in store.namespace_overviews(limit=1, after="agent-2")] == ["bot%1"]


def test_rolling_history_newest_first_with_costs(store: MemoryStore) -> None:
    from partner_memory import PartnerMemory

    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        for turn in range(3):
            memory.record_turn(f"question {turn}", f"answer {turn}")
            memory.roll_now()
    history = store.rolling_history("agent", limit=10)
    assert [r.seq for r in history] == [3, 2, 1]
    assert all(r.cost.summarizer and not r.idle and r.messages >= 2 for r in history)
    assert [r.seq for r in store.rolling_history("agent", limit=1, before=3)] == [2]
    with pytest.raises(NotFoundError):
        store.rolling_history("nobody", limit=1)


def test_excerpts_read_only_the_range_and_the_slices_over_it(store: MemoryStore) -> None:
    """A recall hit deep in a large unit costs its own rows, not the unit's."""
    from partner_memory.model import new_id

    batch = messages(30)
    slices = [MemorySlice(new_id(), s, s + 10, f"part {s}", 1_000 + s) for s in (0, 10, 20)]
    store.ensure_namespace("agent", new_id())
    store.write_units("agent", "u1", [UnitWrite("u1", 1_000, 0, batch, slices)])
    [(rows, held)] = store.read_excerpts("agent", [("u1", 12, 14)])
    assert [m.id for m in rows] == [m.id for m in batch[12:14]]
    assert [s.summary for s in held] == ["part 10"]
    [(rows, held)] = store.read_excerpts("agent", [("u1", 9, 21)])
    assert [s.summary for s in held] == ["part 0", "part 10", "part 20"]
    assert store.read_excerpts("agent", [("nope", 0, 1)]) == [([], [])]


def test_context_state_and_activation(store: MemoryStore) -> None:
    """context_state: the newest slices and the activation in one read; set_activation
    replaces it, None clears it, and a forget of a message it quotes removes it."""
    from partner_memory.model import Activation

    store.ensure_namespace("ns", "s")
    store.append("ns", messages(2, "kept"), "first summary", slice_id="sl1", timestamp=5)
    assert [s.id for _, s in store.context_state("ns", slices=5).slices] == ["sl1"]
    assert store.context_state("ns", slices=5).activation is None
    quoted = store.read_messages("ns", "s", 0, 2)[0].id
    held = Activation(7, "full", "compact", None, (quoted,), (("s", "sl1"),))
    store.set_activation("ns", held)
    assert store.context_state("ns", slices=5).activation == held
    store.set_activation("ns", None)
    assert store.context_state("ns", slices=5).activation is None
    store.set_activation("ns", held)
    store.forget_messages("ns", [quoted], [], at=9)
    assert store.context_state("ns", slices=5).activation is None
    with pytest.raises(NotFoundError):
        store.context_state("nope", slices=5)
