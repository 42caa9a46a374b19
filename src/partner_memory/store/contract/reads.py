"""Reads a read replica may answer: marked by the layer that knows a slightly older
copy will do - the listings of `queries.MemoryQueries` (the CLI's, the HTTP routes',
the inspector's) - never by the store.

The context and recall stay on the primary: a forget made on another host must
leave them at once, and a replica shows it only once it has replayed it.

A backend with a replica (PostgreSQL's `PARTNER_MEMORY_PG_READ_URL`) sends the read
transactions made inside `replica_may_answer()` there, once the replica has replayed
past this process's last commit (its own writes are always seen); everything else -
every write, and every read a decision is made from - goes to the primary.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_REPLICA = ContextVar("partner_memory_replica_may_answer", default=False)


@contextmanager
def replica_may_answer() -> Iterator[None]:
    """Read transactions in this block may be answered by a read replica."""
    token = _REPLICA.set(True)
    try:
        yield
    finally:
        _REPLICA.reset(token)


def replica_allowed() -> bool:
    """Whether a read made now may go to a read replica."""
    return _REPLICA.get()
