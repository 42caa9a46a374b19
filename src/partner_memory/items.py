"""Items: JSON values kept by namespace and exact key, for adapters whose framework
stores values by key (LangGraph's store), as `service.items`.

The facade an adapter holds instead of the store: the verbs of `ItemStore`
with the service's clock, so an adapter never grows the backend contract. An
item whose message is forgotten goes with it.
"""

from __future__ import annotations

from collections.abc import Sequence

from partner_memory.clock import Clock
from partner_memory.store.contract.capabilities import ITEMS, StoredItem, require

__all__ = ["Items", "StoredItem"]


class Items:
    """The items of one store (ConfigurationError if its backend keeps none)."""

    def __init__(self, store: object, clock: Clock) -> None:
        self._store = require(store, ITEMS)
        self._clock = clock

    def _at(self, now: int | None) -> int:
        """The time an operation reads at: the caller's (one operation, one time), or now."""
        return self._clock() if now is None else now

    def put(self, item: StoredItem) -> StoredItem | None:
        """Write `item` over the one at its key; the row replaced (None: none was)."""
        return self._store.put_item(item)

    def delete(self, namespace: str, key: str) -> StoredItem | None:
        return self._store.delete_item(namespace, key)

    def get(
        self,
        namespace: str,
        keys: Sequence[str],
        *,
        refresh: bool = False,
        now: int | None = None,
    ) -> list[StoredItem]:
        """The live items among `keys`; `refresh` restarts the time-to-live of each."""
        return self._store.get_items(namespace, keys, now=self._at(now), refresh=refresh)

    def listing(
        self, prefix: str, *, limit: int | None = None, offset: int = 0, now: int | None = None
    ) -> list[StoredItem]:
        """Live items under the namespaces starting with `prefix`, latest updated first."""
        return self._store.list_items(prefix, now=self._at(now), limit=limit, offset=offset)

    def namespaces(self, *, prefix: str = "", now: int | None = None) -> list[str]:
        return self._store.item_namespaces(now=self._at(now), prefix=prefix)

    def expire(self, *, limit: int = 1000, now: int | None = None) -> list[StoredItem]:
        """Delete up to `limit` items whose time ran out; the ones deleted."""
        return self._store.expire_items(now=self._at(now), limit=limit)
