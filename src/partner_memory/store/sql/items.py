"""Shared SQL for items: values under exact keys, each one row, found by prefix.

A put locks the row it replaces (or, creating one, loses a race to a
concurrent put of the same key and then locks theirs), so the item it
returns as replaced is exactly the one it overwrote, however many processes
write the key. Expired rows are invisible at once and deleted by
`expire_items`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from partner_memory.model import check_limit, check_page
from partner_memory.store.contract.capabilities import StoredItem
from partner_memory.store.sql.base import Cursor, SqlBase
from partner_memory.store.sql.recall import ALL_ROWS
from partner_memory.store.sql.window import chunks, in_list

_COLUMNS = "namespace, item_key, value, created_at, updated_at, expires_at, ttl, message_id"
_LIVE = " AND (expires_at IS NULL OR expires_at > ?)"
_UNDER = "substr(namespace, 1, ?) = ?"


class ItemSql(SqlBase):
    """Item verbs of `MemoryStore`."""

    def put_item(self, item: StoredItem) -> StoredItem | None:
        with self._transaction(write=True) as cur:
            while True:  # until the row is created here, or locked and overwritten
                held = self._held_item(cur, item.namespace, item.key)
                if held is not None:
                    break
                inserted = self._run(
                    cur,
                    f"INSERT INTO items ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (namespace, item_key) DO NOTHING RETURNING item_key",
                    item,
                ).fetchone()
                if inserted is not None:
                    return None
            self._run(
                cur,
                "UPDATE items SET value = ?, created_at = ?, updated_at = ?, expires_at = ?,"
                " ttl = ?, message_id = ? WHERE namespace = ? AND item_key = ?",
                (
                    item.value,
                    held.created_at if held.live(item.updated_at) else item.created_at,
                    item.updated_at,
                    item.expires_at,
                    item.ttl,
                    item.message_id,
                    item.namespace,
                    item.key,
                ),
            )
            return held

    def delete_item(self, namespace: str, key: str) -> StoredItem | None:
        with self._transaction(write=True) as cur:
            held = self._held_item(cur, namespace, key)
            if held is not None:
                self._run(
                    cur,
                    "DELETE FROM items WHERE namespace = ? AND item_key = ?",
                    (namespace, key),
                )
            return held

    def get_items(
        self, namespace: str, keys: Sequence[str], *, now: int, refresh: bool = False
    ) -> list[StoredItem]:
        found: list[StoredItem] = []
        with self._transaction(write=False) as cur:
            for chunk in chunks(list(dict.fromkeys(keys))):
                rows = self._run(
                    cur,
                    f"SELECT {_COLUMNS} FROM items WHERE namespace = ?"
                    f" AND item_key IN {in_list(len(chunk))}" + _LIVE,
                    (namespace, *chunk, now),
                ).fetchall()
                found += [_item(r) for r in rows]
        if refresh and any(i.ttl is not None for i in found):  # a write only when one expires
            with self._transaction(write=True) as cur:
                found = [self._refreshed(cur, i, now) for i in found]
        return found

    def list_items(
        self, prefix: str, *, now: int, limit: int | None = None, offset: int = 0
    ) -> list[StoredItem]:
        check_page(offset, limit)
        with self._transaction(write=False) as cur:
            rows = self._run(
                cur,
                f"SELECT {_COLUMNS} FROM items WHERE {_UNDER}{_LIVE}"
                " ORDER BY updated_at DESC, namespace, item_key LIMIT ? OFFSET ?",
                (len(prefix), prefix, now, ALL_ROWS if limit is None else limit, offset),
            ).fetchall()
        return [_item(r) for r in rows]

    def item_namespaces(self, *, now: int, prefix: str = "") -> list[str]:
        with self._transaction(write=False) as cur:
            rows = self._run(
                cur,
                f"SELECT DISTINCT namespace FROM items WHERE {_UNDER}{_LIVE} ORDER BY namespace",
                (len(prefix), prefix, now),
            ).fetchall()
        return [str(r[0]) for r in rows]

    def expire_items(self, *, now: int, limit: int = 1000) -> list[StoredItem]:
        check_limit(limit)
        with self._transaction(write=True) as cur:
            rows = self._run(
                cur,
                f"SELECT {_COLUMNS} FROM items WHERE expires_at IS NOT NULL AND expires_at <= ?"
                f" ORDER BY expires_at LIMIT ?{self.dialect.lock_clause}",
                (now, limit),
            ).fetchall()
            gone = [_item(r) for r in rows]
            for item in gone:
                self._run(
                    cur,
                    "DELETE FROM items WHERE namespace = ? AND item_key = ?",
                    (item.namespace, item.key),
                )
        return gone

    def _held_item(self, cur: Cursor, namespace: str, key: str) -> StoredItem | None:
        row = self._run(
            cur,
            f"SELECT {_COLUMNS} FROM items WHERE namespace = ? AND item_key = ?"
            + self.dialect.lock_clause,
            (namespace, key),
        ).fetchone()
        return None if row is None else _item(row)

    def _refreshed(self, cur: Cursor, item: StoredItem, now: int) -> StoredItem:
        if item.ttl is None:
            return item
        expires_at = now + item.ttl
        self._run(
            cur,
            "UPDATE items SET expires_at = ? WHERE namespace = ? AND item_key = ?",
            (expires_at, item.namespace, item.key),
        )
        return item._replace(expires_at=expires_at)


def forget_items(self: SqlBase, cur: Cursor, namespace: str, message_ids: Sequence[str]) -> None:
    """Delete the items of `namespace` that forgotten messages made searchable."""
    for chunk in chunks(list(message_ids)):
        self._run(
            cur,
            f"DELETE FROM items WHERE namespace = ? AND message_id IN {in_list(len(chunk))}",
            (namespace, *chunk),
        )


def _item(row: Sequence[Any]) -> StoredItem:
    return StoredItem(
        str(row[0]),
        str(row[1]),
        str(row[2]),
        int(row[3]),
        int(row[4]),
        None if row[5] is None else int(row[5]),
        None if row[6] is None else int(row[6]),
        None if row[7] is None else str(row[7]),
    )
