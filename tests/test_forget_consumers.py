"""A forget reaches the records durable consumers drew from memory's text, in the
forget's own transaction, whichever process forgets - the README's example included."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from partner_memory import (
    InvalidInputError,
    LogEntry,
    MemoryService,
    Record,
    RollingSettings,
)
from partner_memory.store import MemoryStore, Staged
from partner_memory.store.contract.capabilities import RecordQuery

SETTINGS = RollingSettings(idle_check_interval_s=0)


class SliceIndex:
    """The README's example: one record per slice, its summary's words."""

    name = "slice-index"

    def apply(self, entry: LogEntry) -> Sequence[Staged]:
        return [
            Record(
                entry.slice.id,
                {"words": entry.slice.summary},
                unit=entry.unit.id,
                slice=entry.slice.id,
            )
        ]


class MessageCopy:
    """One record per message, drawn from that message."""

    name = "message-copy"

    def apply(self, entry: LogEntry) -> Sequence[Staged]:
        return [Record(m.id, m.content, unit=entry.unit.id, message=m.id) for m in entry.messages]


class UnitCount:
    """One record per unit, drawn from the whole unit: how many messages it holds."""

    name = "unit-count"

    def apply(self, entry: LogEntry) -> Sequence[Staged]:
        return [Record(entry.unit.id, entry.slice.end_index, unit=entry.unit.id)]


def _records(service: MemoryService, consumer: str, namespace: str) -> dict[str, object]:
    found = service.queries.records(namespace, RecordQuery(consumer, limit=1000))
    return {r.key: r.value for r in found}


def _remember(service: MemoryService, namespace: str) -> list[str]:
    memory = service.memory(namespace)
    memory.record_turn("My locker code is 4411.", "I will remember it.")
    memory.roll_now()
    memory.record_turn("I like green tea.", "Noted.")
    memory.roll_now()
    service.catch_up()
    return [m.id for u in memory.core.unit_ids() for m in memory.core.read_messages(u)]


def test_forgetting_reaches_the_consumers_records_from_any_process(store: MemoryStore) -> None:
    with MemoryService(store, settings=SETTINGS) as service:
        for consumer in (SliceIndex(), MessageCopy(), UnitCount()):
            service.register_consumer(consumer).result(30)
        ids = _remember(service, "agent")
        _remember(service, "other")
        assert any("4411" in str(v) for v in _records(service, "slice-index", "agent").values())
        assert len(_records(service, "unit-count", "agent")) == 1
    # another service, which never registered a consumer (another process, the CLI)
    with MemoryService(store, settings=SETTINGS) as forgetting:
        forgetting.forget_messages("agent", [ids[0]])  # the code: its slice's record goes too
        words = _records(forgetting, "slice-index", "agent").values()
        assert not any("4411" in str(v) for v in words)
        assert len(words) == 1  # the tea's slice stays
        copies = _records(forgetting, "message-copy", "agent")
        assert ids[0] not in copies
        assert ids[2] in copies  # by message: the tea stays
        assert _records(forgetting, "unit-count", "agent") == {}  # drawn from the whole unit
        (unit,) = forgetting.memory("agent").core.unit_ids()
        forgetting.forget_unit("agent", unit)
        assert _records(forgetting, "message-copy", "agent") == {}
        assert _records(forgetting, "slice-index", "agent") == {}
        assert _records(forgetting, "message-copy", "other")  # untouched
        forgetting.forget_namespace("other")
        with MemoryService(store, settings=SETTINGS) as again:
            again.memory("other")  # the name again: nothing of the old one comes back
            assert _records(again, "message-copy", "other") == {}


def test_a_record_is_checked_when_made() -> None:
    with pytest.raises(InvalidInputError, match="slice without its unit"):
        Record("k", 1, slice="s")
    with pytest.raises(InvalidInputError, match="1 to 512 characters"):
        Record("", 1)
    with pytest.raises(InvalidInputError, match="not JSON"):
        Record("k", {1, 2}).encoded()


class Wrong:
    name = "wrong"

    def apply(self, entry: LogEntry) -> object:
        return ["not a write"]


def test_a_consumer_returning_what_is_not_a_write_is_recorded_as_failing(
    store: MemoryStore,
) -> None:
    with MemoryService(store, settings=SETTINGS) as service:
        service.register_consumer(Wrong()).result(30)  # type: ignore[arg-type]
        _remember(service, "agent")
        status = {c.name: c for c in service.memory("agent").stats().consumers}
        assert status["wrong"].failures >= 1
        assert "return Record" in (status["wrong"].last_error or "")
        assert status["wrong"].position == 0


def test_a_consumer_without_a_name_or_apply_is_refused(store: MemoryStore) -> None:
    class Nameless:
        def apply(self, entry: LogEntry) -> list[Staged]:
            return []

    with MemoryService(store, settings=SETTINGS) as service:
        for wrong in (Nameless(), object()):
            with pytest.raises(InvalidInputError, match="needs a name and apply"):
                service.register_consumer(wrong)  # type: ignore[arg-type]
