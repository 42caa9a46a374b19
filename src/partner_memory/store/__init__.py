"""Storage backends behind one contract, chosen by the database setting."""

from __future__ import annotations

from pathlib import Path

from partner_memory.errors import ConfigurationError
from partner_memory.store.base import (
    CommittedRolling,
    LogStore,
    MemoryStore,
    ReplayStep,
    RollingCommit,
    UnitStore,
    UnitWrite,
    WindowStore,
)
from partner_memory.store.capabilities import (
    DumpStore,
    ForgetStore,
    HealthStore,
    InspectionStore,
    KeyStore,
    RecallStore,
    TopicStore,
    require,
    supports,
)
from partner_memory.store.defaults import DEFAULT_BUSY_TIMEOUT, DEFAULT_PG_DEADLINE
from partner_memory.store.dialect import Capability, Dialect
from partner_memory.store.staged import (
    FiledTopics,
    IndexedMessages,
    Record,
    Staged,
    StoredRecord,
    Unrecord,
)

__all__ = [
    "Capability",
    "CommittedRolling",
    "Dialect",
    "DumpStore",
    "FiledTopics",
    "ForgetStore",
    "HealthStore",
    "IndexedMessages",
    "InspectionStore",
    "KeyStore",
    "LogStore",
    "MemoryStore",
    "RecallStore",
    "Record",
    "ReplayStep",
    "RollingCommit",
    "Staged",
    "StoredRecord",
    "TopicStore",
    "UnitStore",
    "UnitWrite",
    "Unrecord",
    "WindowStore",
    "open_store",
    "require",
    "supports",
]

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
#: `memory://` (a fresh memory) or `memory://name` (one per name in the process).
MEMORY_SCHEME = "memory://"


def open_store(
    database: str | Path,
    *,
    create: bool = True,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    read_only: bool = False,
    pg_deadline: float = DEFAULT_PG_DEADLINE,
) -> MemoryStore:
    """Open the store a setting names: a `postgresql://` URL, `memory://` (the in-process
    reference backend, for tests: nothing survives the process), else a SQLite file path.

    With `create=False` a missing SQLite file is an error instead of a new,
    empty database, so read-only commands never leave files behind.
    `read_only=True` never writes (SQLite `mode=ro`, PostgreSQL read-only
    transactions) and implies `create=False`. `busy_timeout` is how long a
    SQLite writer waits for another's lock, `pg_deadline` how long a PostgreSQL
    transaction waits on the server.
    """
    if not isinstance(database, str | Path):
        raise ConfigurationError(
            f"the database setting must be a path or URL, got {type(database).__name__}"
        )
    text = str(database).strip()
    if not text:
        raise ConfigurationError("the database setting (--db / PARTNER_MEMORY_DB) is empty")
    if text.startswith(MEMORY_SCHEME):
        from partner_memory.store.memory_store import InMemoryStore

        return InMemoryStore(text.removeprefix(MEMORY_SCHEME), read_only=read_only)
    if text.startswith(_POSTGRES_SCHEMES):
        from partner_memory.store.postgres import PostgresStore

        return PostgresStore(text, read_only=read_only, transaction_deadline=pg_deadline)
    if text.startswith("sqlite:///"):
        text = text.removeprefix("sqlite:///")
    elif "://" in text:
        scheme = text.split("://", 1)[0]
        raise ConfigurationError(
            f"unsupported database URL scheme {scheme!r} in --db / PARTNER_MEMORY_DB;"
            " use a SQLite file path, a postgresql:// URL or memory://"
        )
    from partner_memory.store.sqlite import SQLiteStore

    return SQLiteStore(text, create=create, busy_timeout=busy_timeout, read_only=read_only)
