"""Settings read from the environment (prefix PARTNER_MEMORY_), only when asked."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from partner_memory.errors import ConfigurationError

DEFAULT_DATABASE = "./partner-memory.db"
DEFAULT_NAMESPACE = "default"
DEFAULT_BUSY_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """Where memory lives: a SQLite path or a `postgresql://` URL."""

    database: str = DEFAULT_DATABASE
    namespace: str = DEFAULT_NAMESPACE
    #: Seconds a SQLite writer waits for another writer's lock before giving up.
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> StoreSettings:
        env = os.environ if environ is None else environ
        raw_timeout = env.get("PARTNER_MEMORY_BUSY_TIMEOUT") or str(DEFAULT_BUSY_TIMEOUT)
        try:
            busy_timeout = float(raw_timeout)
        except ValueError:
            busy_timeout = -1.0
        if not busy_timeout >= 0:
            raise ConfigurationError(
                f"PARTNER_MEMORY_BUSY_TIMEOUT must be a number of seconds >= 0, got {raw_timeout!r}"
            )
        return cls(
            database=env.get("PARTNER_MEMORY_DB") or DEFAULT_DATABASE,
            namespace=env.get("PARTNER_MEMORY_NAMESPACE") or DEFAULT_NAMESPACE,
            busy_timeout=busy_timeout,
        )
