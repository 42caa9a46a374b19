"""Settings read from the environment (prefix PARTNER_MEMORY_), only when asked."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from partner_memory.errors import ConfigurationError, InvalidInputError
from partner_memory.model import check_namespace
from partner_memory.store import MemoryStore, open_store
from partner_memory.store.contract.defaults import DEFAULT_BUSY_TIMEOUT, DEFAULT_PG_DEADLINE

DEFAULT_DATABASE = "./partner-memory.db"
DEFAULT_NAMESPACE = "default"


def _seconds(env: Mapping[str, str], name: str, default: float, *, positive: bool) -> float:
    raw = env.get(name) or str(default)
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (value > 0 if positive else value >= 0) or value == float("inf"):
        bound = "> 0" if positive else ">= 0"
        raise ConfigurationError(f"{name} must be a number of seconds {bound}, got {raw!r}")
    return value


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """Where memory lives: a SQLite path or a `postgresql://` URL."""

    database: str = DEFAULT_DATABASE
    namespace: str = DEFAULT_NAMESPACE
    #: Seconds a SQLite writer waits for another writer's lock before giving up.
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT
    #: Seconds a PostgreSQL transaction may wait on the server before its connection is
    #: dropped (a stalled network or server never holds a caller for ever).
    pg_deadline: float = DEFAULT_PG_DEADLINE
    #: What sits between the clients and PostgreSQL: "none" (also right for session
    #: pooling) or "transaction" (PgBouncer's pool_mode=transaction: no session state,
    #: no prepared statements).
    pg_pooler: str = "none"
    #: A PostgreSQL read replica (a standby) for the listings (CLI, HTTP, inspector); a
    #: process always reads its own writes there (`store.contract.reads`).
    pg_read_url: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> StoreSettings:
        """`PARTNER_MEMORY_DB`, `..._NAMESPACE`, `..._BUSY_TIMEOUT`, `..._PG_DEADLINE`,
        `..._PG_POOLER`, `..._PG_READ_URL`."""
        env = os.environ if environ is None else environ
        return cls(
            database=env.get("PARTNER_MEMORY_DB") or DEFAULT_DATABASE,
            namespace=_namespace(env),
            busy_timeout=_seconds(
                env, "PARTNER_MEMORY_BUSY_TIMEOUT", DEFAULT_BUSY_TIMEOUT, positive=False
            ),
            pg_deadline=_seconds(
                env, "PARTNER_MEMORY_PG_DEADLINE", DEFAULT_PG_DEADLINE, positive=True
            ),
            pg_pooler=_pooler(env),
            pg_read_url=env.get("PARTNER_MEMORY_PG_READ_URL") or None,
        )

    def open(self, database: str | Path | None = None, *, read_only: bool = False) -> MemoryStore:
        """The store `database` (else this setting's) names, with these timeouts."""
        return open_store(
            database or self.database,
            busy_timeout=self.busy_timeout,
            pg_deadline=self.pg_deadline,
            pg_pooler=self.pg_pooler,
            pg_read_url=self.pg_read_url,
            read_only=read_only,
        )


#: The values of PARTNER_MEMORY_PG_POOLER.
POOLERS = ("none", "session", "transaction")


def _pooler(env: Mapping[str, str]) -> str:
    raw = env.get("PARTNER_MEMORY_PG_POOLER") or "none"
    if raw not in POOLERS:
        raise ConfigurationError(
            f"PARTNER_MEMORY_PG_POOLER must be one of {', '.join(POOLERS)}, got {raw!r}"
        )
    return "none" if raw == "session" else raw


def _namespace(env: Mapping[str, str]) -> str:
    """PARTNER_MEMORY_NAMESPACE, or the default when it is not set; set but blank is a
    mistake (an empty variable), never a quiet way to the default namespace."""
    name = env.get("PARTNER_MEMORY_NAMESPACE")
    if name is None:
        return DEFAULT_NAMESPACE
    try:
        return check_namespace(name)
    except InvalidInputError as exc:
        raise ConfigurationError(f"PARTNER_MEMORY_NAMESPACE: {exc}") from exc
