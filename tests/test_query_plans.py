"""The hot queries use their indexes on every backend, with or without table statistics.

Each hot operation runs against a real store while its statements are
recorded; each statement is then explained by the database itself. A plan
that reads a whole table of messages, slices, units, window rows or rollings
(a cost that grows with the namespace) fails, and so does a plan that stops
using the index the operation is built on. PostgreSQL here has no statistics
(autovacuum off, nothing analysed), the case the plans must be right for.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from partner_memory.model import Message
from partner_memory.store import MemoryStore
from partner_memory.store.contract.base import AppendOptions, NewSlice, UnitQuery
from partner_memory.store.sql.base import SqlBase
from tests.helpers import messages

#: Tables whose size grows with memory; none may be read whole by a hot query.
GROWING = ("messages", "slices", "units", "trajectory", "rollings")
NAMESPACES, UNITS, SLICES, PER_SLICE = 3, 6, 5, 20


@pytest.fixture
def filled(sql_store: MemoryStore) -> MemoryStore:
    store = sql_store
    for n in range(NAMESPACES):
        ns = f"ns-{n}"
        store.ensure_namespace(ns, f"{ns}-u0")
        for u in range(UNITS):
            store.set_session(ns, f"{ns}-u{u}")
            for s in range(SLICES):
                batch = messages(PER_SLICE, f"{ns}-{u}-{s}")
                stamp = 1_700_000_000_000 + (u * SLICES + s) * 1000
                store.append(ns, batch, NewSlice(f"s{u}-{s}", f"summary {s}", stamp))
        store.append_trajectory(ns, messages(30, f"{ns}-window"), AppendOptions(last_interaction=5))
    return store


@contextmanager
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, tuple[Any, ...]]]]:
    statements: list[tuple[str, tuple[Any, ...]]] = []
    run = SqlBase._run

    def spy(self: SqlBase, cur: Any, query: str, params: Any = ()) -> Any:
        if query.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE")):
            statements.append((query, tuple(params)))
        return run(self, cur, query, params)

    monkeypatch.setattr(SqlBase, "_run", spy)
    yield statements
    monkeypatch.setattr(SqlBase, "_run", run)


def plans(store: MemoryStore, statements: list[tuple[str, tuple[Any, ...]]]) -> list[str]:
    """Each statement's plan, as the database explains it, one string per statement."""
    sql = store  # a SqlBase: the tests run on the SQL backends
    assert isinstance(sql, SqlBase)
    explain = "EXPLAIN QUERY PLAN " if sql.dialect.name == "sqlite" else "EXPLAIN "
    found = []
    with sql._transaction(write=False) as cur:
        for query, params in statements:
            rows = sql._run(cur, explain + query, params).fetchall()
            found.append("\n".join(str(r[-1] if explain.endswith("PLAN ") else r[0]) for r in rows))
    return found


def _whole_table_reads(plan: str, dialect: str) -> list[str]:
    if dialect == "sqlite":  # "SCAN m" reads a table whole; "SCAN x USING INDEX" walks an index
        scanned = re.findall(r"\bSCAN (\w+)(?! USING)", plan)
        return [t for t in scanned if t not in ("wanted", "CONSTANT")]
    return re.findall(r"Seq Scan on (" + "|".join(GROWING) + r")\b", plan)


def _ids(store: MemoryStore, ns: str) -> list[str]:
    unit = store.list_units(ns, UnitQuery(limit=1))[0]
    return [m.id for m in store.read_messages(ns, unit.id, 0, 50)]


HOT: dict[str, tuple[Callable[[MemoryStore], object], str]] = {
    "which ids are stored": (lambda s: s.stored_message_ids("ns-1", _ids(s, "ns-1")), "by_key"),
    "find messages by id": (lambda s: s.find_messages("ns-1", _ids(s, "ns-1")), "by_key"),
    "newest slices": (lambda s: s.recent_slices("ns-1", 5), "slices_newest"),
    "first page of units": (lambda s: s.list_units("ns-1", UnitQuery(limit=2)), "units_by_time"),
    "units since a time": (
        lambda s: s.list_units("ns-1", UnitQuery(limit=2, since=1_700_000_010_000)),
        "units_by_time",
    ),
    "a unit's messages": (lambda s: s.read_messages("ns-1", "ns-1-u3", 40, 60), "messages"),
    "a unit's slices": (lambda s: s.read_slices("ns-1", "ns-1-u3"), "slices_of_unit"),
    "window activity": (lambda s: s.window_activity("ns-1"), "trajectory"),
    "the window": (lambda s: s.load_trajectory("ns-1"), "trajectory"),
    "record into the window": (
        lambda s: s.append_trajectory(
            "ns-1", [Message("user", "new")], AppendOptions(last_interaction=9)
        ),
        "by_key",
    ),
    "rolling log": (lambda s: s.read_log("ns-1", 0, limit=5), "rollings"),
    "namespace counts": (lambda s: s.count_units("ns-1"), "namespaces"),
    "idle candidates": (lambda s: s.idle_candidates(10, ["ns-1", "ns-2"]), "trajectory"),
    "unit id prefix": (lambda s: s.unit_ids_starting("ns-1", "ns-1-u", limit=3), "units"),
    "recall rows since": (lambda s: s.recall_rows("ns-1", 3, 10), "recall_docs_by_seq"),
    "recall state": (lambda s: s.recall_state("ns-1", "recall"), "namespaces"),
}


@pytest.mark.parametrize("operation", list(HOT))
def test_hot_query_uses_its_index(
    filled: MemoryStore, monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    run, index = HOT[operation]
    with recorded(monkeypatch) as statements:
        run(filled)
    assert statements
    explained = plans(filled, statements)
    dialect = filled.dialect.name  # type: ignore[attr-defined]
    for (query, _), plan in zip(statements, explained, strict=True):
        assert not _whole_table_reads(plan, dialect), f"{query}\n{plan}"
    assert any(index in plan for plan in explained), "\n\n".join(explained)
