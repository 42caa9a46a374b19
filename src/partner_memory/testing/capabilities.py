"""The optional capabilities, each tested where the backend offers it (else skipped)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, cast

import pytest

from partner_memory.errors import ConflictError, InvalidInputError, NotFoundError
from partner_memory.model import LogEntry, MemorySlice, Message
from partner_memory.rolling.follow import Apply, LogFollower
from partner_memory.store.contract.base import AppendOptions, BulkWrite, MemoryStore, UnitWrite
from partner_memory.store.contract.capabilities import (
    DumpStore,
    ForgetStore,
    HealthStore,
    InspectionStore,
    ItemStore,
    KeyStore,
    MessagesForget,
    NamespaceQuery,
    RecallStore,
    RecordQuery,
    RecordStore,
    Resummary,
    StoredItem,
    StoredKey,
    TopicStore,
)
from partner_memory.store.contract.staged import FiledTopics, IndexedMessages, Record, Staged
from partner_memory.testing.helpers import held, messages, offers, rolling, trim_window


def _rolled(store: MemoryStore, namespace: str, said: Sequence[Message]) -> None:
    store.append_trajectory(namespace, said, AppendOptions(last_interaction=1_000))
    assert store.begin_rolling(namespace, "h", ttl_ms=60_000) is not None
    store.commit_rolling(namespace, rolling("h", said, drop=[m.id for m in said]))


def _follow(store: MemoryStore, consumer: str, namespace: str, apply: Apply) -> None:
    while LogFollower(store).round(consumer, namespace, apply) is not None:
        pass


class WordsOnly:
    """A recall analysis for the tests: lower-cased words, no vectors."""

    embedder_name = "words"

    def rows(self, batch: Sequence[Message]) -> list[tuple[str | None, str, bytes | None]]:
        return [(m.role, m.content.lower(), None) for m in batch]


class KeysContract:
    """`KeyStore`."""

    def test_keys_are_added_found_listed_and_revoked(self, store: MemoryStore) -> None:
        offers(store, KeyStore)
        assert isinstance(store, KeyStore)
        first = StoredKey("k1", "hash-1", "agent-*", "read", 10, None)
        store.add_api_key(first)
        store.add_api_key(StoredKey("k2", "hash-2", "*", "admin", 20, None))
        with pytest.raises(ConflictError):
            store.add_api_key(StoredKey("k1", "other", "*", "read", 30, None))
        assert store.find_api_key("k1") == first
        assert store.find_api_key("nope") is None
        assert store.revoke_api_key("k1", at=40)
        assert store.revoke_api_key("k1", at=50)  # twice is not an error, the first time stays
        assert not store.revoke_api_key("nope", at=40)
        assert [(k.key_id, k.revoked_at) for k in store.api_keys()] == [("k1", 40), ("k2", None)]


class TopicsContract:
    """`TopicStore`, fed by a follower's `FiledTopics`."""

    def test_topics_are_filed_counted_and_found_with_those_below(self, store: MemoryStore) -> None:
        offers(store, TopicStore)
        assert isinstance(store, TopicStore)
        store.ensure_namespace("ns", "s")
        for _ in range(3):
            _rolled(store, "ns", messages(2))
        paths = {1: ["travel->japan", "food"], 2: ["travel->japan->kyoto"], 3: ["travel->peru"]}

        def file(entry: LogEntry) -> Sequence[Staged]:
            return [FiledTopics([*paths[entry.seq], paths[entry.seq][0]])]  # a repeat is one

        _follow(store, "topics", "ns", file)
        assert store.topic_paths("ns") == [
            ("food", 1),
            ("travel->japan", 1),
            ("travel->japan->kyoto", 1),
            ("travel->peru", 1),
        ]
        assert store.topic_paths("ns", limit=1) == [("food", 1)]
        found = store.topic_slices("ns", "travel->japan")
        assert [(t.path, t.start_index, t.end_index) for t in found] == [
            ("travel->japan", 0, 2),
            ("travel->japan->kyoto", 2, 4),
        ]
        assert store.topic_slices("ns", "travel->jap") == []  # a level, not a prefix
        with pytest.raises(NotFoundError):
            store.topic_paths("ghost")


class RecallContract:
    """`RecallStore`, fed by a follower's `IndexedMessages`."""

    def test_recall_rows_follow_the_log_and_are_rebuilt(self, store: MemoryStore) -> None:
        offers(store, RecallStore)
        assert isinstance(store, RecallStore)
        store.ensure_namespace("ns", "s")
        said = [Message("user", "Kyoto in April", timestamp=5), Message("assistant", "Book")]
        _rolled(store, "ns", said)
        born = store.recall_state("ns", "recall").generation
        assert store.recall_state("ns", "recall") == (born, 0, 1, None)

        def index(entry: LogEntry) -> Sequence[Staged]:
            rows = [(m.role, m.content.lower(), b"\x01\x02") for m in entry.messages]
            return [IndexedMessages(rows, "model-a")]

        _follow(store, "recall", "ns", index)
        assert store.recall_state("ns", "recall") == (born, 1, 1, "model-a")
        rows = store.recall_rows("ns", 0, 1)
        assert [(r.unit_id, r.position, r.seq, r.speaker, r.timestamp) for r in rows] == [
            ("s", 0, 1, "user", 5),
            ("s", 1, 1, "assistant", None),
        ]
        assert [(r.terms, r.vector) for r in rows] == [
            ("kyoto in april", b"\x01\x02"),
            ("book", b"\x01\x02"),
        ]
        assert [(r.role, r.metadata) for r in rows] == [("user", None), ("assistant", None)]
        assert store.recall_rows("ns", 1, 1) == []
        # another embedder's rows are kept by words only: vectors of one model per namespace
        _rolled(store, "ns", messages(1))

        def other(entry: LogEntry) -> Sequence[Staged]:
            return [IndexedMessages([("user", "m", b"\x09")], "model-b")]

        _follow(store, "recall", "ns", other)
        (late,) = store.recall_rows("ns", 1, 2)
        assert late.vector is None
        assert store.reindex_recall("ns", "recall", WordsOnly()) == 3
        generation, indexed, head, embedder = store.recall_state("ns", "recall")
        assert (generation, indexed, head, embedder) == (born + 1, 2, 2, "words")
        rebuilt = store.recall_rows("ns", -1, 2)
        assert [(r.seq, r.terms) for r in rebuilt] == [
            (0, "kyoto in april"),
            (0, "book"),
            (0, "m-0"),
        ]
        pages = [store.recall_rows("ns", -1, 2, offset=o, limit=2) for o in (0, 2, 4)]
        assert pages == [rebuilt[:2], rebuilt[2:], []]
        assert store.recall_rows("ns", -1, 2, offset=1) == rebuilt[1:]
        for offset, limit in ((-1, None), (0, 0), ("1", None)):
            with pytest.raises(InvalidInputError):
                store.recall_rows("ns", -1, 2, offset=cast(Any, offset), limit=limit)
        with pytest.raises(NotFoundError):
            store.recall_state("ghost", "recall")

    def test_recall_rows_say_which_messages_only_ask(self, store: MemoryStore) -> None:
        """`RecallRow.asks`: the text ends in a question mark (Latin or CJK, spaces after
        it allowed), read from the message itself however long it is."""
        offers(store, RecallStore)
        assert isinstance(store, RecallStore)
        store.ensure_namespace("ns", "s")
        said = [
            "Where am I travelling?",
            "I'm off to Kyoto in April.",
            "Is it far? ",
            "我下个月去哪里？",
            "What? No, it is next year.",
            "long " * 5_000 + "words, and then a question?",
            "?",
        ]
        _rolled(store, "ns", [Message("user", text) for text in said])

        def index(entry: LogEntry) -> Sequence[Staged]:
            return [IndexedMessages([("user", "t", None) for _ in entry.messages], "words")]

        _follow(store, "recall", "ns", index)
        rows = store.recall_rows("ns", 0, 1)
        assert [r.asks for r in rows] == [True, False, True, True, False, True, True]


class ForgetContract:
    """`ForgetStore`: a forget reaches every row drawn from what it forgets."""

    def _remembered(self, store: MemoryStore) -> list[Message]:
        store.ensure_namespace("ns", "u1")
        said = messages(4)
        store.write_units(
            "ns",
            BulkWrite(
                "u1",
                [
                    UnitWrite(
                        "u1",
                        5,
                        0,
                        said,
                        [MemorySlice("s1", 0, 2, "first", 5), MemorySlice("s2", 2, 4, "second", 6)],
                    )
                ],
            ),
        )
        return said

    def test_forgetting_messages_blanks_them_everywhere(self, store: MemoryStore) -> None:
        offers(store, ForgetStore)
        assert isinstance(store, ForgetStore)
        offers(store, RecordStore)  # what the forget must drop includes records
        assert isinstance(store, RecordStore)
        store.ensure_namespace("ns", "u1")
        said = messages(4)
        _rolled(store, "ns", said[:2])
        _rolled(store, "ns", said[2:])
        window = messages(1, "window")
        store.append_trajectory("ns", window, AppendOptions(last_interaction=9))

        def keep(entry: LogEntry) -> Sequence[Staged]:
            unit, held = entry.unit.id, entry.slice.id
            by_message = [Record(m.id, m.content, unit=unit, message=m.id) for m in entry.messages]
            return [
                *by_message,
                Record(f"slice-{held}", entry.slice.summary, unit=unit, slice=held),
                Record(f"unit-{entry.seq}", entry.seq, unit=unit),
                Record(f"free-{entry.seq}", "no text"),
            ]

        _follow(store, "keeper", "ns", keep)
        first_slice, second_slice = store.read_slices("ns", "u1")
        located = store.locate_messages("ns", [said[0].id, "nope", window[0].id])
        assert [(p.message_id, p.unit_id, p.position) for p in located] == [(said[0].id, "u1", 0)]
        change = Resummary("u1", first_slice.id, "what remains", "test")
        found = store.forget_messages(
            "ns", MessagesForget([said[0].id, window[0].id], [change], 50)
        )
        assert found == 2
        gone = store.read_messages("ns", "u1", 0, 1)[0]
        assert (gone.id, gone.content, gone.metadata) == (said[0].id, "", {"forgotten": True})
        assert store.read_messages("ns", "u1", 1, 2) == said[1:2]
        assert store.read_slices("ns", "u1")[0].summary == "what remains"
        assert store.load_trajectory("ns").messages == []
        keys = {r.key for r in store.read_records("ns", RecordQuery("keeper"))}
        assert said[0].id not in keys  # drawn from the message
        assert said[1].id in keys  # by message: another message's record stays
        assert f"slice-{first_slice.id}" not in keys  # its slice held the message
        assert f"slice-{second_slice.id}" in keys  # the other slice held none
        assert not {"unit-1", "unit-2"} & keys  # drawn from the whole unit, which held it
        assert {"free-1", "free-2"} <= keys  # drawn from nothing: kept
        assert store.forget_log("ns") == [
            ("message", window[0].id, 50),
            ("message", said[0].id, 50),
        ]
        asked = [window[0].id, said[0].id, said[1].id, "nope"]
        assert store.forgotten_messages("ns", asked) == {window[0].id, said[0].id}
        assert store.forgotten_messages("other", asked) == set()
        with pytest.raises(NotFoundError):
            store.forget_messages("ns", MessagesForget(["nope"], [], 60))

    @pytest.mark.parametrize("lookahead", [None, 4])
    def test_a_forget_while_a_consumer_prepares_is_what_it_applies(
        self, store: MemoryStore, lookahead: int | None
    ) -> None:
        """What was read to prepare is applied only if the log would read the same: a
        forget committed meanwhile is seen, in this round and in the next."""
        offers(store, ForgetStore)
        assert isinstance(store, ForgetStore)
        store.ensure_namespace("ns", "u1")
        said = messages(4)
        _rolled(store, "ns", said[:1])
        _rolled(store, "ns", said[1:2])
        _rolled(store, "ns", said[2:3])
        applied: list[tuple[int, str]] = []

        def prepare(entries: Sequence[LogEntry]) -> None:
            doomed = [m.id for e in entries for m in e.messages if m.id in (said[0].id, said[2].id)]
            if doomed:
                store.forget_messages("ns", MessagesForget(doomed[:1], [], 7))

        def apply(entry: LogEntry) -> Sequence[Staged]:
            applied.extend((entry.seq, m.content) for m in entry.messages)
            return []

        while (
            LogFollower(store).round("c", "ns", apply, prepare=prepare, lookahead=lookahead)
            is not None
        ):
            pass
        # the first round forgets said[0] while preparing; the second, said[2] (seen
        # ahead in the first round when looking ahead)
        assert applied == [(1, ""), (2, said[1].content), (3, "")]

    def test_a_forget_takes_the_activation_quoting_it(self, store: MemoryStore) -> None:
        offers(store, ForgetStore)
        assert isinstance(store, ForgetStore)
        from partner_memory.model import Activation

        said = self._remembered(store)
        held = Activation(7, "full", None, None, (said[0].id,), ())
        store.set_activation("ns", held)
        store.forget_messages("ns", MessagesForget([said[1].id], [], 9))  # not quoted: it stays
        assert store.context_state("ns", slices=1).activation == held
        store.forget_messages("ns", MessagesForget([said[0].id], [], 9))
        assert store.context_state("ns", slices=1).activation is None
        store.set_activation("ns", Activation(8, "full", None, None, (), (("u1", "s2"),)))
        store.forget_unit("ns", "u1", at=10)
        assert store.context_state("ns", slices=1).activation is None

    def test_forgetting_a_unit_or_a_namespace_deletes_them(self, store: MemoryStore) -> None:
        offers(store, ForgetStore)
        assert isinstance(store, ForgetStore)
        offers(store, RecordStore)  # what the forget must drop includes records
        assert isinstance(store, RecordStore)
        store.ensure_namespace("ns", "u1")
        said = messages(2)
        _rolled(store, "ns", said)
        store.set_session("ns", "u2")
        other = messages(1, "other")
        _rolled(store, "ns", other)

        def keep(entry: LogEntry) -> Sequence[Staged]:
            return [Record(m.id, m.content, message=m.id) for m in entry.messages]

        _follow(store, "keeper", "ns", keep)
        store.forget_unit("ns", "u1", at=5)
        assert store.get_unit("ns", "u1") is None
        assert store.unit_ids("ns") == ["u2"]
        assert [e.unit.id for e in store.read_log("ns", 0)] == ["u2"]
        assert store.stored_message_ids("ns", [m.id for m in said]) == set()
        assert [r.key for r in store.read_records("ns", RecordQuery("keeper"))] == [other[0].id]
        assert held(store.get_namespace("ns")).unit_count == 1
        with pytest.raises(NotFoundError):
            store.forget_unit("ns", "u1", at=6)
        store.forget_namespace("ns", at=7)
        assert store.get_namespace("ns") is None
        assert store.forget_log("ns")[0] == ("namespace", "ns", 7)
        assert ("unit", "u1", 5) in store.forget_log("ns")
        store.ensure_namespace("ns", "again")  # the name again: nothing of the old one
        assert store.read_records("ns", RecordQuery("keeper")) == []
        assert store.unit_ids("ns") == []
        with pytest.raises(NotFoundError):
            store.forget_namespace("ghost", at=8)
        assert all(isinstance(t, str) for t in store.purge())


class DumpContract:
    """`DumpStore`: a namespace out and back in, every row as it was."""

    def test_a_dump_goes_back_in_exactly(self, store: MemoryStore) -> None:
        offers(store, DumpStore)
        assert isinstance(store, DumpStore)
        offers(store, RecordStore)
        assert isinstance(store, RecordStore)
        store.ensure_namespace("ns", "u1")
        said = [Message("user", "hi", timestamp=5, metadata={"k": [1, "x"]}), *messages(2)]
        _rolled(store, "ns", said)
        store.append_trajectory("ns", messages(1, "window"), AppendOptions(last_interaction=7))
        trim_window(store, "ns", quiet_since=7)
        _follow(store, "keeper", "ns", lambda e: [Record("k", {"seq": e.seq}, unit=e.unit.id)])
        store.record_consumer_failure("hook", "ns", durable=False, error="oops", at=3)
        if isinstance(store, ItemStore):
            store.put_item(StoredItem("ns", "k", '{"a":1}', 1, 2, 9, 5, said[0].id))
            store.put_item(StoredItem("ns-other", "k", '{"b":2}', 1, 2))
        dump = store.export_namespace("ns")
        with pytest.raises(ConflictError):
            store.import_namespace(dump)
        assert isinstance(store, ForgetStore)
        store.forget_namespace("ns", at=1)
        store.import_namespace(dump)
        assert store.export_namespace("ns") == dump
        assert store.read_messages("ns", "u1", 0, 5) == said
        assert [r.value for r in store.read_records("ns", RecordQuery("keeper"))] == [{"seq": 1}]
        if isinstance(store, ItemStore):
            assert dump.items == [("k", '{"a":1}', 1, 2, 9, 5, said[0].id)]
            assert [i.value for i in store.get_items("ns", ["k"], now=3)] == ['{"a":1}']
        with pytest.raises(NotFoundError):
            store.export_namespace("ghost")


class InspectionContract:
    """`InspectionStore`: the figures of the inspector and `stats`."""

    def test_rolling_totals_sum_every_rolling(self, store: MemoryStore) -> None:
        offers(store, InspectionStore)
        assert isinstance(store, InspectionStore)
        store.ensure_namespace("ns", "s")
        _rolled(store, "ns", messages(2))
        _rolled(store, "ns", messages(3))
        totals = store.rolling_totals("ns")
        assert (totals.rollings, totals.messages, totals.fallbacks) == (2, 5, 2)
        assert totals.by_summarizer == {"extractive": 2}
        assert totals.pipeline_ms == 3.0
        assert totals.recent_fallbacks == ("no LLM", "no LLM")
        with pytest.raises(NotFoundError):
            store.rolling_totals("ghost")

    def test_namespace_overviews_search_page_and_count(self, store: MemoryStore) -> None:
        offers(store, InspectionStore)
        assert isinstance(store, InspectionStore)
        from partner_memory import PartnerMemory

        for name in ["Agent-1", "agent-2", "bot_1", "bot%1"]:
            with PartnerMemory(store, name, idle_timer=False) as memory:
                memory.record_turn("hello there", "hi", timestamp=1_700_000_000_000)
                if name == "agent-2":
                    memory.roll_now()
                    memory.record_turn("later", "ok", timestamp=1_700_000_100_000)
        every = store.namespace_overviews(NamespaceQuery(limit=10))
        assert [o.name for o in every] == ["Agent-1", "agent-2", "bot%1", "bot_1"]
        two = every[1]
        assert (two.unit_count, two.slice_count, two.rolling_count) == (1, 1, 1)
        assert two.message_count == 2  # rolled into the unit
        assert two.window_count >= 2  # the later turn (and what the rolling kept)
        assert two.last_activity is not None
        assert every[0].last_activity is not None
        assert every[0].unit_count == 0

        def names(query: NamespaceQuery) -> list[str]:
            return [o.name for o in store.namespace_overviews(query)]

        assert names(NamespaceQuery(10, search="AGENT")) == ["Agent-1", "agent-2"]
        assert names(NamespaceQuery(10, search="_")) == ["bot_1"]
        assert names(NamespaceQuery(10, search="%")) == ["bot%1"]
        assert names(NamespaceQuery(1, after="agent-2")) == ["bot%1"]

    def test_rolling_history_newest_first_with_costs(self, store: MemoryStore) -> None:
        offers(store, InspectionStore)
        assert isinstance(store, InspectionStore)
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


class HealthContract:
    """`HealthStore`: what `/metrics` reads - windows, leases and consumers' lag."""

    def test_health_counts_windows_leases_and_consumer_lag(self, store: MemoryStore) -> None:
        offers(store, HealthStore)
        assert isinstance(store, HealthStore)
        empty = store.store_health()
        assert empty == (0, 0, 0, 0, 0, {})
        for name in "abcd":
            store.ensure_namespace(name, "s")
        _rolled(store, "a", messages(2))
        _rolled(store, "a", messages(2))
        _rolled(store, "b", messages(1))
        store.append_trajectory("c", messages(3), AppendOptions(last_interaction=1_000))
        store.append_trajectory("d", messages(5), AppendOptions(last_interaction=1_000))
        assert store.begin_rolling("c", "alive", ttl_ms=600_000) is not None
        assert store.begin_rolling("d", "dead", ttl_ms=1) is not None
        time.sleep(0.05)  # the second lease lapses
        assert LogFollower(store).round("c1", "a", lambda entry: [], batch=1) is not None
        store.record_consumer_failure("c2", "b", durable=True, error="boom", at=5)
        store.record_consumer_failure("c3", "b", durable=False, error="boom", at=5)
        health = store.store_health()
        assert (health.namespaces, health.window_messages, health.longest_window) == (4, 8, 5)
        assert (health.leases_held, health.leases_expired) == (1, 1)
        # c1: one rolling of "a" and the one of "b" behind; c2 never applied any
        assert health.consumer_lag == {"c1": (2, 2), "c2": (3, 2)}
        _follow(store, "c1", "a", lambda entry: [])
        _follow(store, "c1", "b", lambda entry: [])
        assert store.store_health().consumer_lag["c1"] == (0, 0)
