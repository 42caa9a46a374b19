"""`ItemStore`: values under exact keys, found by prefix, expiring, and gone with a
forget of the message that made them searchable."""

from __future__ import annotations

import pytest

from partner_memory.errors import InvalidInputError
from partner_memory.store.contract.base import AppendOptions, MemoryStore
from partner_memory.store.contract.capabilities import (
    FORGETTING,
    ITEMS,
    ForgetStore,
    ItemStore,
    MessagesForget,
    StoredItem,
    supports,
)
from partner_memory.testing.capabilities import _rolled
from partner_memory.testing.helpers import messages


def _items(store: MemoryStore) -> ItemStore:
    if not supports(store, ITEMS):
        pytest.skip(f"{type(store).__name__} does not offer ItemStore")
    assert isinstance(store, ItemStore)
    return store


def _item(
    namespace: str,
    key: str,
    value: str = '{"a":1}',
    at: int = 10,
    *,
    expires_at: int | None = None,
    ttl: int | None = None,
    message_id: str | None = None,
) -> StoredItem:
    return StoredItem(namespace, key, value, at, at, expires_at, ttl, message_id)


class ItemsContract:
    """`ItemStore`."""

    def test_items_are_put_replaced_got_and_deleted_by_exact_key(self, store: MemoryStore) -> None:
        items = _items(store)
        assert items.put_item(_item("a/", "k1")) is None
        assert items.put_item(_item("a/", "K1", '"upper"')) is None  # keys are exact
        first = _item("a/", "k1", '{"a":2}', at=20, message_id="m2")
        assert items.put_item(first) == _item("a/", "k1")  # the one it replaced
        got = {i.key: i for i in items.get_items("a/", ["k1", "K1", "nope", "k1"], now=30)}
        assert got == {"k1": first._replace(created_at=10), "K1": _item("a/", "K1", '"upper"')}
        assert items.get_items("a", ["k1"], now=30) == []  # namespaces are exact too
        assert items.delete_item("a/", "k1") == got["k1"]
        assert items.delete_item("a/", "k1") is None
        assert [i.key for i in items.get_items("a/", ["k1", "K1"], now=30)] == ["K1"]
        many = [f"k{i}" for i in range(1200)]  # more than one statement's parameters
        for key in many:
            items.put_item(_item("big/", key))
        assert len(items.get_items("big/", many, now=30)) == 1200

    def test_items_are_listed_newest_first_under_a_prefix(self, store: MemoryStore) -> None:
        items = _items(store)
        for namespace, key, at in [
            ("users/1/", "a", 10),
            ("users/1/notes/", "b", 30),
            ("users/10/", "c", 20),
            ("users/1/", "d", 30),
            ("teams/1/", "e", 40),
        ]:
            items.put_item(_item(namespace, key, at=at))
        listed = items.list_items("users/1/", now=50)
        assert [(i.namespace, i.key) for i in listed] == [
            ("users/1/", "d"),
            ("users/1/notes/", "b"),
            ("users/1/", "a"),
        ]
        assert [i.key for i in items.list_items("users/", now=50, limit=2, offset=1)] == ["b", "c"]
        assert [i.key for i in items.list_items("", now=50, limit=1)] == ["e"]
        assert items.item_namespaces(now=50, prefix="users/1") == [
            "users/1/",
            "users/1/notes/",
            "users/10/",
        ]
        assert items.item_namespaces(now=50) == [
            "teams/1/",
            "users/1/",
            "users/1/notes/",
            "users/10/",
        ]
        with pytest.raises(InvalidInputError):
            items.list_items("", now=50, offset=-1)
        with pytest.raises(InvalidInputError):
            items.list_items("", now=50, limit=0)

    def test_expired_items_are_not_found_refreshed_on_read_and_deleted(
        self, store: MemoryStore
    ) -> None:
        items = _items(store)
        items.put_item(_item("t/", "short", at=10, expires_at=100, ttl=90))
        items.put_item(_item("t/", "fixed", at=10, expires_at=100))
        items.put_item(_item("t/", "forever", at=10))
        assert len(items.get_items("t/", ["short", "fixed", "forever"], now=99)) == 3
        refreshed = items.get_items("t/", ["short", "fixed"], now=99, refresh=True)
        assert {i.key: i.expires_at for i in refreshed} == {"short": 189, "fixed": 100}
        assert [i.key for i in items.get_items("t/", ["short", "fixed"], now=150)] == ["short"]
        assert [i.key for i in items.list_items("t/", now=150)] == ["forever", "short"]
        assert items.item_namespaces(now=1_000, prefix="t/") == ["t/"]
        replaced = items.put_item(_item("t/", "fixed", at=160))  # over an expired one
        assert replaced is not None
        assert replaced.expires_at == 100
        assert items.get_items("t/", ["fixed"], now=170)[0].created_at == 160  # a new item
        gone = items.expire_items(now=200)
        assert [(i.key, i.expires_at) for i in gone] == [("short", 189)]
        assert items.expire_items(now=200) == []
        assert sorted(i.key for i in items.list_items("t/", now=200)) == ["fixed", "forever"]
        with pytest.raises(InvalidInputError):
            items.expire_items(now=200, limit=0)

    def test_a_forget_of_its_message_deletes_the_item(self, store: MemoryStore) -> None:
        items = _items(store)
        if not supports(store, FORGETTING):
            pytest.skip(f"{type(store).__name__} does not offer ForgetStore")
        assert isinstance(store, ForgetStore)
        store.ensure_namespace("ns/", "u1")
        said = messages(3)
        store.append_trajectory("ns/", said, AppendOptions(last_interaction=1))
        for message in said:
            items.put_item(_item("ns/", f"key-{message.id}", message_id=message.id))
        items.put_item(_item("ns/", "unindexed"))
        items.put_item(_item("other/", "same-message", message_id=said[0].id))
        store.forget_messages("ns/", MessagesForget([said[0].id], [], 5))
        keys = [f"key-{m.id}" for m in said] + ["unindexed"]
        assert len(items.get_items("ns/", keys, now=6)) == 3
        assert len(items.get_items("other/", ["same-message"], now=6)) == 1
        rolled = messages(2, "rolled")
        _rolled(store, "ns/", rolled)
        items.put_item(_item("ns/", "in-unit", message_id=rolled[1].id))
        store.forget_unit("ns/", "u1", at=6)
        assert items.get_items("ns/", ["in-unit"], now=6) == []
        assert len(items.get_items("ns/", keys, now=6)) == 3  # the window's stay
        store.forget_namespace("ns/", at=7)
        assert items.get_items("ns/", keys, now=8) == []
        assert len(items.get_items("other/", ["same-message"], now=8)) == 1
