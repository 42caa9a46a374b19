"""The service verbs adapters use instead of the store: known ids, and items."""

from __future__ import annotations

import pytest

from partner_memory import Message, RollingSettings
from partner_memory.errors import ConfigurationError
from partner_memory.items import Items, StoredItem
from partner_memory.service import MemoryService


def test_known_ids_are_the_units_and_what_was_forgotten() -> None:
    settings = RollingSettings(idle_check_interval_s=0)
    with MemoryService.open("memory://", settings=settings) as service:
        memory = service.memory("n")
        said = [Message("user", f"m{i}", id=f"id-{i}") for i in range(4)]
        memory.record_messages(said[:2])
        assert memory.roll_now(idle=True) is not None  # both stored in a unit
        memory.record_messages(said[2:])
        memory.forget_messages(["id-0"])
        asked = ["id-0", "id-1", "id-3", "never"]
        assert memory.core.known_ids(asked) == {"id-0", "id-1"}  # units, and forgotten
        assert memory.core.known_ids([]) == set()


def test_items_keep_values_by_key_under_the_services_clock() -> None:
    with MemoryService.open("memory://") as service:
        items = service.items
        assert isinstance(items, Items)
        now = 1_000
        item = StoredItem("a/b", "k", {"v": 1}, now, now, expires_at=now + 10)
        assert items.put(item) is None
        assert [i.value for i in items.get("a/b", ["k"], now=now + 5)] == [{"v": 1}]
        assert items.get("a/b", ["k"], now=now + 10) == []  # expired
        assert items.namespaces(prefix="a", now=now) == ["a/b"]
        assert [i.key for i in items.expire(now=now + 20)] == ["k"]


def test_items_on_a_backend_without_them_name_what_is_missing() -> None:
    class NoItems:
        pass

    with pytest.raises(ConfigurationError, match="items"):
        Items(NoItems(), lambda: 0)
