"""Ready to shard by namespace: every per-namespace table carries the namespace, and
every statement on one names the namespace it touches.

A tenant-sharded engine (Citus, distributed by `namespace_id`) routes a statement to
one shard only when the statement says which namespace it is about. The schema is
read from the database itself; the statements are the ones the store really runs,
recorded while the shipped suite (`partner_memory.testing`, every verb) runs on
SQLite and on PostgreSQL. Statements that span namespaces by design are named here
with why.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from partner_memory.store import open_store
from tests.helpers import run_test_module

#: Tables whose rows belong to one namespace, by its id.
BY_ID = (
    "units",
    "messages",
    "slices",
    "trajectory",
    "activity",
    "rollings",
    "rolling_leases",
    "consumers",
    "recall_docs",
    "topics",
    "activations",
    "consumer_records",
)
#: Tables keyed by the namespace's name: a forget's record outlives the namespace's id,
#: and an item's namespace is the framework's name for it.
BY_NAME = ("items", "forgets")
#: Tables shared by every namespace (Citus: reference tables).
GLOBAL = ("namespaces", "api_keys", "partner_memory_schema")

#: Verbs that span namespaces by design (a multi-shard query there), and why.
SPANNING = {
    "store_health": "the operator's totals over every namespace",
    "lagging_namespaces": "which namespaces a consumer is behind in",
    "idle_candidates": "which of the watched namespaces went quiet",
    "list_namespaces": "a listing of namespaces",
    "count_namespaces": "a count of namespaces",
    "namespace_overviews": "a listing of namespaces with their figures",
    "renew_leases": "every lease one holder holds",
    "list_items": "items under a namespace prefix (a framework's folders)",
    "item_namespaces": "the namespaces items live in",
    "expire_items": "items past their time, wherever they are",
    "purge": "rewrites whole tables",
    "open_schema": "the schema",
    "migrate": "the schema",
}

RECORDER = """
import atexit
import json
import sys

from partner_memory.store.sql.base import SqlBase

SEEN = {}
_run = SqlBase._run


def recorded(self, cur, query, params=()):
    # the store's public method on the stack (never f_locals: reading a running
    # generator's locals can disturb it)
    verb, frame = "?", sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_name
        method = getattr(type(self), name, None)
        if not name.startswith("_") and getattr(method, "__code__", None) is frame.f_code:
            verb = name
            break
        frame = frame.f_back
    del frame  # a frame kept alive keeps the driver's state alive with it
    SEEN.setdefault(" ".join(query.split()), set()).add(verb)
    return _run(self, cur, query, params)


SqlBase._run = recorded
atexit.register(
    lambda: json.dump({q: sorted(v) for q, v in SEEN.items()}, open("seen.json", "w"))
)
"""

SUITE = """
import uuid
from urllib.parse import quote

import psycopg
import pytest

from partner_memory.store import open_store
from partner_memory.testing import StoreContract


@pytest.fixture
def url(request, tmp_path):
    given = request.config.getoption("url")
    if given == "sqlite":
        yield str(tmp_path / "memory.db")
        return
    schema = f"pm_shard_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(given, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in given else "?"
    yield f"{given}{separator}options={quote(f'-csearch_path={schema}')}"
    with psycopg.connect(given, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


class TestRecorded(StoreContract):
    @pytest.fixture
    def store(self, url):
        opened = open_store(url)
        yield opened
        opened.close()
"""


def _writes_namespace(query: str) -> bool:
    """An INSERT names the namespace among its columns."""
    found = re.match(r"INSERT INTO (\w+) \(([^)]*)\)", query)
    assert found is not None
    table, columns = found.group(1), [c.strip() for c in found.group(2).split(",")]
    return ("namespace" if table in BY_NAME else "namespace_id") in columns


def _filters_namespace(query: str, table: str) -> bool:
    if table in BY_NAME:
        return re.search(r"\bnamespace\s*(=|IN\b)", query) is not None
    by_id = re.search(r"\bnamespace_id\s*(=|IN\b)", query)
    by_name = re.search(r"JOIN namespaces n ON n\.id = \w+\.namespace_id WHERE n\.name = \?", query)
    return by_id is not None or by_name is not None


def unnamed(seen: dict[str, list[str]]) -> list[str]:
    """The statements on a per-namespace table that do not say which namespace."""
    found = []
    for query, verbs in seen.items():
        if re.match(r"(CREATE|ALTER|DROP|PRAGMA|VACUUM)\b", query) or set(verbs) <= set(SPANNING):
            continue
        for table in BY_ID + BY_NAME:
            if not re.search(rf"\b(FROM|JOIN|INTO|UPDATE)\s+{table}\b", query):
                continue
            named = (
                _writes_namespace(query)
                if query.startswith("INSERT INTO " + table + " ")
                else _filters_namespace(query, table)
            )
            if not named:
                found.append(f"{table} ({', '.join(verbs)}): {query[:200]}")
    return found


def test_the_check_finds_a_statement_that_does_not_name_its_namespace() -> None:
    assert unnamed({"DELETE FROM topics WHERE unit_pk = ?": ["forget_unit"]})
    assert unnamed({"INSERT INTO messages (unit_pk, position) VALUES (?, ?)": ["append"]})
    assert not unnamed({"DELETE FROM topics WHERE namespace_id = ? AND unit_pk = ?": ["x"]})
    assert not unnamed({"SELECT COUNT(*) FROM trajectory": ["store_health"]})


def test_every_per_namespace_table_carries_the_namespace(tmp_path: Path, pg_url: str) -> None:
    open_store(str(tmp_path / "schema.db")).close()
    with sqlite3.connect(tmp_path / "schema.db") as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        columns = {t: {r[1] for r in conn.execute(f"PRAGMA table_info({t})")} for t in tables}
    assert tables == set(BY_ID + BY_NAME + GLOBAL)
    for table in BY_ID:
        assert "namespace_id" in columns[table], table
    for table in BY_NAME:
        assert "namespace" in columns[table], table
    import psycopg

    open_store(pg_url).close()
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema()"
        ).fetchall()
    assert {(t, c) for t, c in rows} >= {(t, "namespace_id") for t in BY_ID}


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_every_statement_names_its_namespace(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    url = "sqlite" if engine == "sqlite" else str(request.getfixturevalue("pg_server"))
    (tmp_path / "conftest.py").write_text(
        RECORDER
        + f"\n\ndef pytest_addoption(parser):\n    parser.addoption('--url', default={url!r})\n"
    )
    done = run_test_module(tmp_path, "test_recorded.py", SUITE, "-W", "error")
    assert done.returncode == 0, done.stdout[-3000:]
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert len(seen) > 100
    assert unnamed(seen) == []
