"""Shared SQL for what a namespace's context is made of: its newest slices and the
latest recall's activation, read in one transaction so every process sees one context."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from partner_memory.model import Activation, ContextState
from partner_memory.store.contract.capabilities import HELD_BLOCKS_KEY
from partner_memory.store.sql.base import Cursor, SqlBase
from partner_memory.store.sql.log import recent_slices_of

_ACTIVATION = "at, full_text, compact_text, abstract_text, message_ids, slice_keys"
_ACTIVATION_OF_A = ", ".join(f"a.{column}" for column in _ACTIVATION.split(", "))


class ContextSql(SqlBase):
    """Context verbs of `MemoryStore`."""

    def context_state(self, namespace: str, *, slices: int) -> ContextState:
        with self._transaction(write=False) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            recent = recent_slices_of(self, cur, namespace_id, slices)
            # the activation and the held blocks in one statement: one round trip
            row = self._run(
                cur,
                f"SELECT {_ACTIVATION_OF_A}, (SELECT i.value FROM items i"
                " WHERE i.namespace = ? AND i.item_key = ? AND i.expires_at IS NULL)"
                " FROM (SELECT 1 AS one) o LEFT JOIN activations a ON a.namespace_id = ?",
                (namespace, HELD_BLOCKS_KEY, namespace_id),
            ).fetchone()
            activation = None if row is None or row[0] is None else _activation(row)
            held = None if row is None or row[-1] is None else str(row[-1])
            return ContextState(recent, activation, held)

    def set_activation(self, namespace: str, activation: Activation | None) -> None:
        with self._transaction(write=True) as cur:
            namespace_id = self._namespace_id(cur, namespace)
            self._run(cur, "DELETE FROM activations WHERE namespace_id = ?", (namespace_id,))
            if activation is None:
                return
            self._run(
                cur,
                f"INSERT INTO activations (namespace_id, {_ACTIVATION})"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    namespace_id,
                    activation.at,
                    activation.full,
                    activation.compact,
                    activation.abstract,
                    "\n".join(activation.message_ids),
                    "\n".join(f"{unit}\t{slice_id}" for unit, slice_id in activation.slices),
                ),
            )


def _activation(row: Any) -> Activation:
    keys = [line.split("\t", 1) for line in str(row[5]).split("\n") if line]
    return Activation(
        at=int(row[0]),
        full=str(row[1]),
        compact=None if row[2] is None else str(row[2]),
        abstract=None if row[3] is None else str(row[3]),
        message_ids=tuple(i for i in str(row[4]).split("\n") if i),
        slices=tuple((u, s) for u, s in keys),
    )


def read_activation(sql: SqlBase, cur: Cursor, namespace_id: int) -> Activation | None:
    row = sql._run(
        cur, f"SELECT {_ACTIVATION} FROM activations WHERE namespace_id = ?", (namespace_id,)
    ).fetchone()
    return None if row is None else _activation(row)


def drop_activation(
    sql: SqlBase,
    cur: Cursor,
    namespace_id: int,
    *,
    messages: Collection[str] = (),
    slices: Collection[str] = (),
    units: Collection[str] = (),
) -> None:
    """Inside a forget: the activation goes if it quotes anything forgotten."""
    held = read_activation(sql, cur, namespace_id)
    if held is not None and held.quotes(messages=messages, slices=slices, units=units):
        sql._run(cur, "DELETE FROM activations WHERE namespace_id = ?", (namespace_id,))
