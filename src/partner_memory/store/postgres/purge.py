"""PostgreSQL's purge: forgotten text out of the table files, or a refusal saying why not.

A delete leaves the old row versions in the files; `VACUUM FULL` rewrites a
table with only the live ones - but it must keep a deleted version that a
transaction older than the delete can still see (a REPEATABLE READ report, a
client idle in a transaction, a replication slot). So the purge rewrites each
table reading VACUUM's own count of the dead versions it had to keep; where
it kept some, it waits, up to `wait_s`, for the transactions that began before
the purge to end and rewrites those tables again; and it refuses
(StorageUnavailableError) when any stayed, naming what holds them, instead of
reporting a purge that left copies behind.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from psycopg.errors import LockNotAvailable

from partner_memory.errors import StorageUnavailableError

if TYPE_CHECKING:
    import psycopg

#: How long a purge waits for older transactions to end.
PURGE_WAIT_S = 30.0

#: VACUUM FULL VERBOSE's count of the deleted versions an older snapshot still sees.
_KEPT = re.compile(r"(\d+) dead row versions cannot be removed yet")

#: The sessions of this database whose snapshot began before the purge (they may see
#: the deleted versions), with what names them; prepared transactions and replication
#: slots hold old versions too.
_HOLDERS = """
SELECT 'backend ' || pid || ' (' || coalesce(nullif(application_name, ''),
       'no application name') || ', ' || coalesce(state, '?') || ' since ' || xact_start || ')'
  FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid()
   AND backend_xmin IS NOT NULL AND xact_start < %s
UNION ALL
SELECT 'prepared transaction ' || quote_literal(gid) || ' (since ' || prepared || ')'
  FROM pg_prepared_xacts WHERE database = current_database() AND prepared < %s
UNION ALL
SELECT 'replication slot ' || quote_literal(slot_name)
  FROM pg_replication_slots
 WHERE (xmin IS NOT NULL OR catalog_xmin IS NOT NULL)
   AND (database IS NULL OR database = current_database())
"""


def purge_tables(
    conn: psycopg.Connection[Any], tables: Sequence[str], *, wait_s: float = PURGE_WAIT_S
) -> None:
    """Rewrite `tables` (an autocommit connection); where VACUUM had to keep deleted
    versions for an older snapshot, wait for it (up to `wait_s`) and rewrite those
    tables again; refuse, naming the holders, when one still sees them."""
    began = (conn.execute("SELECT clock_timestamp()").fetchone() or [None])[0]
    deadline = time.monotonic() + wait_s
    kept = _rewritten(conn, tables, began, deadline)
    if not kept:
        return
    while _holders(conn, began) and time.monotonic() < deadline:
        time.sleep(0.1)
    kept = _rewritten(conn, list(kept), began, deadline)
    if kept:
        raise _refusal(conn, began, f"{sum(kept.values())} old row version(s) are still visible")


def _rewritten(
    conn: psycopg.Connection[Any], tables: Sequence[str], began: object, deadline: float
) -> dict[str, int]:
    """VACUUM FULL each table; the deleted versions each had to keep (VACUUM's count)."""
    said: list[str] = []

    def heard(notice: Any) -> None:
        said.append(f"{notice.message_primary or ''} {notice.message_detail or ''}")

    kept: dict[str, int] = {}
    # a transaction that read a table holds a lock VACUUM FULL waits for: wait no longer
    # than the purge's own wait, then say who holds it
    waited = max(deadline - time.monotonic(), 1.0)
    conn.execute(f"SET lock_timeout = '{int(waited * 1000)}ms'")
    conn.add_notice_handler(heard)
    try:
        for table in tables:
            said.clear()
            conn.execute(f"VACUUM (FULL, VERBOSE) {table}")
            count = sum(int(found) for line in said for found in _KEPT.findall(line))
            if count:
                kept[table] = count
    except LockNotAvailable as exc:
        raise _refusal(conn, began, f"{table} is in use") from exc
    finally:
        conn.remove_notice_handler(heard)
        conn.execute("RESET lock_timeout")
    return kept


def _refusal(conn: psycopg.Connection[Any], began: object, what: str) -> StorageUnavailableError:
    held = "; ".join(_holders(conn, began)) or "a transaction that has since ended"
    return StorageUnavailableError(
        f"purge could not remove the forgotten text from the files: {what} to a transaction"
        f" older than the forget ({held}); the text is forgotten for every reader: run"
        " `partner-memory purge` again once it has ended"
    )


def _holders(conn: psycopg.Connection[Any], began: object) -> list[str]:
    return [str(row[0]) for row in conn.execute(_HOLDERS, (began, began)).fetchall()]
