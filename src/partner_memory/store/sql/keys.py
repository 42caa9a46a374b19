"""Shared SQL for the HTTP service's API keys (hashes only, never a secret)."""

from __future__ import annotations

from typing import Any

from partner_memory.store.contract.capabilities import StoredKey
from partner_memory.store.sql.base import SqlBase

_COLUMNS = "key_id, secret_hash, namespaces, scope, created_at, revoked_at"


class KeySql(SqlBase):
    """API-key verbs of `MemoryStore`."""

    def add_api_key(self, key: StoredKey) -> None:
        with self._transaction(write=True) as cur:
            self._run(cur, f"INSERT INTO api_keys ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)", key)

    def api_keys(self) -> list[StoredKey]:
        with self._transaction(write=False) as cur:
            rows = self._run(cur, f"SELECT {_COLUMNS} FROM api_keys ORDER BY pk").fetchall()
        return [_key(r) for r in rows]

    def find_api_key(self, key_id: str) -> StoredKey | None:
        with self._transaction(write=False) as cur:
            row = self._run(
                cur, f"SELECT {_COLUMNS} FROM api_keys WHERE key_id = ?", (key_id,)
            ).fetchone()
        return None if row is None else _key(row)

    def revoke_api_key(self, key_id: str, *, at: int) -> bool:
        with self._transaction(write=True) as cur:
            found = self._run(
                cur, "SELECT revoked_at FROM api_keys WHERE key_id = ?", (key_id,)
            ).fetchone()
            if found is None:
                return False
            if found[0] is None:
                self._run(cur, "UPDATE api_keys SET revoked_at = ? WHERE key_id = ?", (at, key_id))
        return True


def _key(row: Any) -> StoredKey:
    return StoredKey(
        str(row[0]),
        str(row[1]),
        str(row[2]),
        str(row[3]),
        int(row[4]),
        None if row[5] is None else int(row[5]),
    )
