"""Shared SQL for the operator's health figures: a handful of aggregates, one read.

Each is one scan of a small table (namespaces, leases, consumers) or a
grouped count of the windows, so a scrape costs the same whatever the units
hold. A consumer's lag counts the namespaces it never followed in full.
"""

from __future__ import annotations

from partner_memory.store.contract.capabilities import StoreHealth
from partner_memory.store.sql.base import SqlBase


class HealthSql(SqlBase):
    """`HealthStore` over SQL both databases accept."""

    def store_health(self) -> StoreHealth:
        now = self.dialect.now_ms
        with self._transaction(write=False) as cur:
            namespaces = int(self._run(cur, "SELECT COUNT(*) FROM namespaces").fetchone()[0])
            total, longest = self._run(
                cur,
                "SELECT COALESCE(SUM(n), 0), COALESCE(MAX(n), 0) FROM"
                " (SELECT COUNT(*) AS n FROM trajectory GROUP BY namespace_id) w",
            ).fetchone()
            held, expired = self._run(
                cur,
                f"SELECT COALESCE(SUM(CASE WHEN expires_at >= {now} THEN 1 ELSE 0 END), 0),"
                f" COALESCE(SUM(CASE WHEN expires_at < {now} THEN 1 ELSE 0 END), 0)"
                " FROM rolling_leases",
            ).fetchone()
            lag = self._run(
                cur,
                "SELECT k.name, COALESCE(SUM(n.rolling_seq - COALESCE(c.position, 0)), 0),"
                " COALESCE(SUM(CASE WHEN n.rolling_seq > COALESCE(c.position, 0)"
                " THEN 1 ELSE 0 END), 0)"
                " FROM (SELECT DISTINCT name FROM consumers WHERE durable = 1) k"
                " CROSS JOIN namespaces n"
                " LEFT JOIN consumers c ON c.name = k.name AND c.namespace_id = n.id"
                " GROUP BY k.name ORDER BY k.name",
            ).fetchall()
        return StoreHealth(
            namespaces=namespaces,
            window_messages=int(total),
            longest_window=int(longest),
            leases_held=int(held),
            leases_expired=int(expired),
            consumer_lag={str(r[0]): (int(r[1]), int(r[2])) for r in lag},
        )
