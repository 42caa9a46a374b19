"""Reading another library's SQLite file: read-only, with errors that name the file."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from partner_memory.errors import InvalidInputError


@contextmanager
def opened(path: str) -> Iterator[sqlite3.Connection]:
    """`path` opened read-only (never created, never written)."""
    if not Path(path).is_file():
        raise InvalidInputError(f"{path}: no such file")
    try:
        connection = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise InvalidInputError(f"{path}: cannot open it as SQLite ({exc})") from None
    try:
        yield connection
    except sqlite3.DatabaseError as exc:
        raise InvalidInputError(f"{path}: {exc}") from None
    finally:
        connection.close()


def has_table(connection: sqlite3.Connection, table: str) -> bool:
    found = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).fetchone()
    return found is not None


def sqlite_time(value: object) -> int | None:
    """Milliseconds from SQLite's CURRENT_TIMESTAMP text ("2025-05-01 10:00:00", UTC)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)
