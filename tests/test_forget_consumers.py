"""A forget reaches what durable consumers keep of memory's text (`KeptText`), in the
forget's own transaction, whichever process forgets - the README's example included."""

from __future__ import annotations

import pytest

from partner_memory import (
    InvalidInputError,
    KeptText,
    LogEntry,
    LogTransaction,
    MemoryService,
    RollingSettings,
)
from partner_memory.store import MemoryStore

SETTINGS = RollingSettings(idle_check_interval_s=0)


class SliceIndex:
    """The README's example: one row per slice, its summary's words."""

    name = "slice-index"
    keeps = (KeptText("my_index", slice="slice_id"),)

    def setup(self, tx: LogTransaction) -> None:
        tx.execute(
            "CREATE TABLE IF NOT EXISTS my_index (namespace TEXT, slice_id TEXT, words TEXT)"
        )

    def apply(self, tx: LogTransaction, entry: LogEntry) -> None:
        tx.execute(
            "INSERT INTO my_index VALUES (?, ?, ?)",
            (entry.namespace, entry.slice.id, entry.slice.summary),
        )


class MessageCopy:
    """One row per message, keyed by message id and by unit."""

    name = "message-copy"
    keeps = (KeptText("copies", namespace="ns", unit="unit_id", message="message_id"),)

    def setup(self, tx: LogTransaction) -> None:
        tx.execute(
            "CREATE TABLE IF NOT EXISTS copies (ns TEXT, unit_id TEXT, message_id TEXT, body TEXT)"
        )

    def apply(self, tx: LogTransaction, entry: LogEntry) -> None:
        for message in entry.messages:
            tx.execute(
                "INSERT INTO copies VALUES (?, ?, ?, ?)",
                (entry.namespace, entry.unit.id, message.id, message.content),
            )


def _rows(store: MemoryStore, table: str) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []

    def read(tx: LogTransaction) -> None:
        found.extend(tuple(str(v) for v in r) for r in tx.execute(f"SELECT * FROM {table}"))

    store.run_in_transaction(read)
    return sorted(found)


def _remember(service: MemoryService, namespace: str) -> list[str]:
    memory = service.memory(namespace)
    memory.record_turn("My locker code is 4411.", "I will remember it.")
    memory.roll_now()
    memory.record_turn("I like green tea.", "Noted.")
    memory.roll_now()
    service.catch_up()
    return [m.id for u in memory.core.unit_ids() for m in memory.core.read_messages(u)]


def test_forgetting_reaches_the_consumers_rows_from_any_process(store: MemoryStore) -> None:
    with MemoryService(store, settings=SETTINGS) as service:
        for consumer in (SliceIndex(), MessageCopy()):
            service.register_consumer(consumer).result(30)
        ids = _remember(service, "agent")
        _remember(service, "other")
    assert any("4411" in r[2] for r in _rows(store, "my_index"))
    # another service, which never registered either consumer (another process, the CLI)
    with MemoryService(store, settings=SETTINGS) as forgetting:
        forgetting.forget_messages("agent", [ids[0]])  # the code: its slice's row goes too
        assert not any("4411" in r[2] for r in _rows(store, "my_index") if r[0] == "agent")
        assert ids[0] not in {r[2] for r in _rows(store, "copies")}
        assert ids[2] in {r[2] for r in _rows(store, "copies")}  # the tea stays
        (unit,) = forgetting.memory("agent").core.unit_ids()
        forgetting.forget_unit("agent", unit)
        assert not [r for r in _rows(store, "copies") if r[0] == "agent"]
        assert not [r for r in _rows(store, "my_index") if r[0] == "agent"]
        assert [r for r in _rows(store, "copies") if r[0] == "other"]  # untouched
        forgetting.forget_namespace("other")
    assert _rows(store, "copies") == []
    assert _rows(store, "my_index") == []


def test_a_declaration_names_plain_identifiers_and_a_key() -> None:
    with pytest.raises(InvalidInputError, match="plain SQL identifier"):
        KeptText("my_index; DROP TABLE messages", slice="slice_id")
    with pytest.raises(InvalidInputError, match="unit, slice or message column"):
        KeptText("my_index")


def test_a_consumer_that_dropped_its_table_does_not_stop_a_forget(store: MemoryStore) -> None:
    with MemoryService(store, settings=SETTINGS) as service:
        service.register_consumer(SliceIndex()).result(30)
        ids = _remember(service, "agent")
        store.run_in_transaction(lambda tx: tx.execute("DROP TABLE my_index"))
        assert service.forget_messages("agent", [ids[0]]) == 1
