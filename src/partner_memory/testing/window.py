"""The window layer (`WindowStore`): a namespace's live state."""

from __future__ import annotations

import time

import pytest

from partner_memory.errors import InvalidInputError, NotFoundError
from partner_memory.model import Message, WindowActivity
from partner_memory.store.contract.base import AppendOptions, MemoryStore, NewSlice
from partner_memory.testing.helpers import messages, trim_window


class WindowContract:
    """Every verb of `WindowStore`."""

    def test_window_append_reports_length_and_refuses_without_writing(
        self, store: MemoryStore
    ) -> None:
        """append_trajectory: one transaction; the new length back; bad input changes
        nothing."""
        from partner_memory.errors import InvalidInputError

        with pytest.raises(NotFoundError, match="nope"):
            store.append_trajectory("nope", messages(1), AppendOptions(last_interaction=5))
        with pytest.raises(NotFoundError, match="nope"):
            store.append_trajectory("nope", messages(1))
        store.ensure_namespace("ns", "s")
        first = messages(3)
        assert store.append_trajectory("ns", first, AppendOptions(last_interaction=7)) == (3, None)
        assert store.append_trajectory("ns", messages(2, "more")) == (5, None)
        # the newest interaction before the appended one: what a quiet gap is measured from
        assert store.append_trajectory("ns", [], AppendOptions(last_interaction=9)) == (5, 7)
        with pytest.raises(InvalidInputError, match=first[1].id):
            store.append_trajectory(
                "ns", [*messages(1, "new"), first[1]], AppendOptions(last_interaction=9)
            )
        state = store.load_trajectory("ns")
        assert (len(state.messages), state.last_interaction) == (5, 7)
        prompt = Message(role="user", content="<input>a task</input>")
        assert (
            store.append_trajectory("ns", [prompt], AppendOptions(structured={prompt.id})).length
            == 6
        )
        assert (
            store.append_trajectory(
                "ns", messages(1, "turn"), AppendOptions(drop_structured=True)
            ).length
            == 6
        )
        assert prompt.id not in {m.id for m in store.load_trajectory("ns").messages}

    def test_a_turn_of_fresh_ids_appends_as_any_other(self, store: MemoryStore) -> None:
        """fresh_ids (a recorded turn: PostgreSQL appends it in one call) answers,
        refuses and drops structured prompts as the checked append does."""
        with pytest.raises(NotFoundError, match="nope"):
            store.append_trajectory(
                "nope", messages(2), AppendOptions(last_interaction=5, fresh_ids=True)
            )
        store.ensure_namespace("ns", "s")
        first = messages(2)
        assert store.append_trajectory(
            "ns", first, AppendOptions(last_interaction=7, fresh_ids=True)
        ) == (2, None)
        assert store.append_trajectory(
            "ns", [], AppendOptions(last_interaction=9, fresh_ids=True)
        ) == (2, 7)
        with pytest.raises(InvalidInputError, match=first[0].id):
            store.append_trajectory(
                "ns", [first[0]], AppendOptions(last_interaction=11, fresh_ids=True)
            )
        prompt = Message(role="user", content="<input>a task</input>", timestamp=3)
        reply = Message(role="assistant", content="done", metadata={"k": "v"})
        appended = store.append_trajectory(
            "ns",
            [prompt, reply],
            AppendOptions(last_interaction=12, structured={prompt.id}, fresh_ids=True),
        )
        assert appended == (4, 7)  # an empty append has no row to hold its interaction
        turn = messages(2, "turn")
        appended = store.append_trajectory(
            "ns", turn, AppendOptions(last_interaction=13, drop_structured=True, fresh_ids=True)
        )
        assert appended == (5, 12)
        state = store.load_trajectory("ns")
        assert [m.id for m in state.messages] == [m.id for m in [*first, reply, *turn]]
        assert state.messages[2] == reply
        assert state.last_interaction == 13

    def test_window_refuses_an_id_already_stored_in_a_unit(self, store: MemoryStore) -> None:
        """A reused id would be skipped by the next rolling and lost: it is refused at once."""
        from partner_memory.core import MemoryCore
        from partner_memory.errors import InvalidInputError

        core = MemoryCore(store, "ns")
        stored = Message(role="user", content="stored")
        core.update_memory_unit([stored], "s")
        again = Message(role="user", content="new words", id=stored.id)
        with pytest.raises(InvalidInputError, match=stored.id):
            store.append_trajectory("ns", [again], AppendOptions(last_interaction=5))
        assert store.load_trajectory("ns").messages == []

    def test_context_state_and_activation(self, store: MemoryStore) -> None:
        """context_state: the newest slices and the activation in one read; set_activation
        replaces it, None clears it."""
        from partner_memory.model import Activation

        store.ensure_namespace("ns", "s")
        store.append("ns", messages(2, "kept"), NewSlice("sl1", "first summary", 5))
        assert [s.id for _, s in store.context_state("ns", slices=5).slices] == ["sl1"]
        assert store.context_state("ns", slices=5).activation is None
        quoted = store.read_messages("ns", "s", 0, 2)[0].id
        held = Activation(7, "full", "compact", None, (quoted,), (("s", "sl1"),))
        store.set_activation("ns", held)
        assert store.context_state("ns", slices=5).activation == held
        store.set_activation("ns", None)
        assert store.context_state("ns", slices=5).activation is None
        with pytest.raises(NotFoundError):
            store.context_state("nope", slices=5)

    def test_window_reads_agree(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "s")
        said = messages(3)
        store.append_trajectory("ns", said[:2], AppendOptions(last_interaction=10))
        store.append_trajectory("ns", said[2:], AppendOptions(last_interaction=20))
        state = store.load_trajectory("ns")
        assert state.messages == said
        assert state.interactions == (10, 10, 20)
        assert state.idle_rolled_for is None
        assert store.trajectory_length("ns") == 3
        assert store.window_activity("ns") == WindowActivity(3, 20, None)
        trim_window(store, "ns", [said[0].id, "not-there"])
        assert store.load_trajectory("ns").messages == said[1:]
        for read in (store.load_trajectory, store.trajectory_length, store.window_activity):
            with pytest.raises(NotFoundError):
                read("ghost")

    def test_a_batch_naming_an_id_twice_is_refused(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "s")
        twin = Message("user", "twin")
        with pytest.raises(InvalidInputError, match="twice"):
            store.append_trajectory("ns", [twin, twin])
        assert store.trajectory_length("ns") == 0

    def test_one_lease_holder_at_a_time(self, store: MemoryStore) -> None:
        store.ensure_namespace("ns", "s")
        store.append_trajectory("ns", messages(2), AppendOptions(last_interaction=5))
        taken = store.begin_rolling("ns", "a", ttl_ms=60_000)
        assert taken is not None
        assert len(taken.messages) == 2  # the window, read with the lease
        assert store.rolling_holder("ns") == "a"
        assert store.begin_rolling("ns", "b", ttl_ms=60_000) is None
        assert store.begin_rolling("ns", "b", ttl_ms=60_000, replacing="a") is not None
        assert store.rolling_holder("ns") == "b"
        store.release_rolling("ns", "a")  # not a's any more: nothing happens
        assert store.rolling_holder("ns") == "b"
        store.release_rolling("ns", "b")
        assert store.rolling_holder("ns") is None
        assert store.begin_rolling("ns", "c", ttl_ms=60_000) is not None
        with pytest.raises(NotFoundError):
            store.begin_rolling("ghost", "a", ttl_ms=1)

    def test_a_lease_expires_unless_renewed(self, store: MemoryStore) -> None:
        store.ensure_namespace("old", "s")
        store.ensure_namespace("kept", "s")
        assert store.begin_rolling("old", "dead", ttl_ms=1) is not None
        assert store.begin_rolling("kept", "alive", ttl_ms=1) is not None
        store.renew_leases("alive", ttl_ms=600_000)
        time.sleep(0.05)
        assert store.rolling_holder("old") is None  # expired
        assert store.begin_rolling("old", "next", ttl_ms=60_000) is not None
        assert store.rolling_holder("kept") == "alive"
        assert store.begin_rolling("kept", "next", ttl_ms=60_000) is None

    def test_idle_candidates_are_quiet_and_not_yet_rolled(self, store: MemoryStore) -> None:
        for name in ("quiet", "busy", "empty"):
            store.ensure_namespace(name, "s")
        store.append_trajectory("quiet", messages(1), AppendOptions(last_interaction=100))
        store.append_trajectory("busy", messages(1), AppendOptions(last_interaction=900))
        among = ["quiet", "busy", "empty", "ghost"]
        assert store.idle_candidates(500, among) == ["quiet"]
        assert store.idle_candidates(50, among) == []
        trim_window(store, "quiet", quiet_since=100)
        assert store.idle_candidates(500, among) == []
        assert store.window_activity("quiet").idle_rolled_for == 100
        assert store.load_trajectory("quiet").idle_rolled_for == 100
        store.append_trajectory("quiet", messages(1), AppendOptions(last_interaction=300))
        assert store.idle_candidates(500, among) == ["quiet"]
