"""Settings read from the environment (prefix PARTNER_MEMORY_), only when asked."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_DATABASE = "./partner-memory.db"
DEFAULT_NAMESPACE = "default"


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """Where memory lives: a SQLite path or a `postgresql://` URL."""

    database: str = DEFAULT_DATABASE
    namespace: str = DEFAULT_NAMESPACE

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> StoreSettings:
        env = os.environ if environ is None else environ
        return cls(
            database=env.get("PARTNER_MEMORY_DB") or DEFAULT_DATABASE,
            namespace=env.get("PARTNER_MEMORY_NAMESPACE") or DEFAULT_NAMESPACE,
        )
