"""Storage backends behind one contract, chosen by the database setting."""

from __future__ import annotations

from pathlib import Path

from partner_memory.errors import ConfigurationError
from partner_memory.store.contract.base import (
    CommittedRolling,
    LogStore,
    MemoryStore,
    ReplayStep,
    RollingCommit,
    UnitStore,
    UnitWrite,
    WindowStore,
)
from partner_memory.store.contract.capabilities import (
    Capability,
    DumpStore,
    ForgetStore,
    HealthStore,
    InspectionStore,
    KeyStore,
    RecallStore,
    RecordStore,
    StoredRecord,
    TopicStore,
    require,
    supports,
)
from partner_memory.store.contract.defaults import DEFAULT_BUSY_TIMEOUT, DEFAULT_PG_DEADLINE
from partner_memory.store.contract.staged import (
    FiledTopics,
    IndexedMessages,
    Record,
    Staged,
    Unrecord,
)
from partner_memory.store.registry import StoreOptions, opener
from partner_memory.store.sql.dialect import Dialect

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
    "RecordStore",
    "ReplayStep",
    "RollingCommit",
    "Staged",
    "StoreOptions",
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

#: `memory://` (a fresh memory) or `memory://name` (one per name in the process).
MEMORY_SCHEME = "memory://"


def open_store(
    database: str | Path,
    *,
    create: bool = True,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    read_only: bool = False,
    pg_deadline: float = DEFAULT_PG_DEADLINE,
    pg_pooler: str = "none",
    pg_read_url: str | None = None,
) -> MemoryStore:
    """Open the store a setting names: `scheme://...` by its scheme (`postgresql://`,
    `memory://` - the in-process reference backend, for tests: nothing survives the
    process - or a backend another package declares, `store.registry`), else a SQLite
    file path.

    With `create=False` a missing SQLite file is an error instead of a new,
    empty database, so read-only commands never leave files behind.
    `read_only=True` never writes (SQLite `mode=ro`, PostgreSQL read-only
    transactions) and implies `create=False`. `busy_timeout` is how long a
    SQLite writer waits for another's lock, `pg_deadline` how long a PostgreSQL
    transaction waits on the server; `pg_pooler="transaction"` keeps every PostgreSQL
    transaction free of session state, for a pooler that hands each transaction to any
    server connection (PgBouncer's pool_mode=transaction); `pg_read_url` names a read
    replica for the reads that may be answered by one (`store.contract.reads`).
    """
    if not isinstance(database, str | Path):
        raise ConfigurationError(
            f"the database setting must be a path or URL, got {type(database).__name__}"
        )
    text = str(database).strip()
    if not text:
        raise ConfigurationError("the database setting (--db / PARTNER_MEMORY_DB) is empty")
    scheme = text.split("://", 1)[0] if "://" in text else "sqlite"
    options = StoreOptions(create, read_only, busy_timeout, pg_deadline, pg_pooler, pg_read_url)
    return opener(scheme)(text, options)
