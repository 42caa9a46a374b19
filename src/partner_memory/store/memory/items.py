"""The in-memory store's items, with the SQL backends' semantics (`store.sql.items`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from partner_memory.model import check_limit, check_page
from partner_memory.store.contract.capabilities import StoredItem
from partner_memory.store.memory.state import MemoryBase, SharedMemory, bigint


class ItemsMixin(MemoryBase):
    """Item verbs of `InMemoryStore`: one dict of (namespace, key) to item, under the
    store's lock."""

    def put_item(self, item: StoredItem) -> StoredItem | None:
        for what in ("created_at", "updated_at", "expires_at", "ttl"):
            bigint(getattr(item, what), what)
        with self._writing() as shared:
            held = shared.items.get((item.namespace, item.key))
            created = (
                held.created_at
                if held is not None and held.live(item.updated_at)
                else item.created_at
            )
            shared.items[item.namespace, item.key] = item._replace(created_at=created)
            return held

    def delete_item(self, namespace: str, key: str) -> StoredItem | None:
        with self._writing() as shared:
            return shared.items.pop((namespace, key), None)

    def get_items(
        self, namespace: str, keys: Sequence[str], *, now: int, refresh: bool = False
    ) -> list[StoredItem]:
        with self._writing() if refresh else self._reading() as shared:
            found = [shared.items.get((namespace, k)) for k in dict.fromkeys(keys)]
            live = [i for i in found if i is not None and i.live(now)]
            if refresh:
                live = [_refreshed(shared, i, now) for i in live]
            return live

    def list_items(
        self, prefix: str, *, now: int, limit: int | None = None, offset: int = 0
    ) -> list[StoredItem]:
        check_page(offset, limit)
        with self._reading() as shared:
            under = sorted(_under(shared.items.values(), prefix, now), key=_newest_first)
        return under[offset:] if limit is None else under[offset : offset + limit]

    def item_namespaces(self, *, now: int, prefix: str = "") -> list[str]:
        with self._reading() as shared:
            return sorted({i.namespace for i in _under(shared.items.values(), prefix, now)})

    def expire_items(self, *, now: int, limit: int = 1000) -> list[StoredItem]:
        check_limit(limit)
        with self._writing() as shared:
            gone = sorted(
                (i for i in shared.items.values() if not i.live(now)),
                key=lambda i: i.expires_at or 0,
            )[:limit]
            for item in gone:
                del shared.items[item.namespace, item.key]
            return gone


def forget_items(shared: SharedMemory, namespace: str, message_ids: Iterable[str] | None) -> None:
    """Delete the items of `namespace` that forgotten messages made searchable (None:
    every item of the namespace)."""
    ids = None if message_ids is None else set(message_ids)
    shared.items = {
        k: i
        for k, i in shared.items.items()
        if i.namespace != namespace or (ids is not None and i.message_id not in ids)
    }


def _under(items: Iterable[StoredItem], prefix: str, now: int) -> list[StoredItem]:
    return [i for i in items if i.namespace.startswith(prefix) and i.live(now)]


def _newest_first(item: StoredItem) -> tuple[int, str, str]:
    return (-item.updated_at, item.namespace, item.key)


def _refreshed(shared: SharedMemory, item: StoredItem, now: int) -> StoredItem:
    if item.ttl is None:
        return item
    renewed = item._replace(expires_at=now + item.ttl)
    shared.items[item.namespace, item.key] = renewed
    return renewed
