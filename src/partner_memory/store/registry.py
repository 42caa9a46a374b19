"""Backends by URL scheme: the built-in ones, and any another distribution declares.

A backend from another distribution is named in its metadata, under the
entry-point group `partner_memory.stores`, by the URL scheme it serves:

    [project.entry-points."partner_memory.stores"]
    mystore = "my_package.stores:open_mystore"

`open_mystore(url, options)` gets the whole setting (`mystore://...`) and a
`StoreOptions`, and returns a store that meets the core contract; from then
on `--db mystore://...`, `PARTNER_MEMORY_DB`, `serve` and MCP open it like
any other. The built-in schemes (`memory`, `postgresql`, `postgres`,
`sqlite`) cannot be taken over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

from partner_memory.errors import ConfigurationError
from partner_memory.store.contract.base import MemoryStore

#: The entry-point group a distribution declares its backends under.
GROUP = "partner_memory.stores"


@dataclass(frozen=True, slots=True)
class StoreOptions:
    """How the caller wants the store opened: `create` (a missing database may be made),
    `read_only` (never write), and the waits a backend may honour (SQLite's lock wait,
    a PostgreSQL transaction's deadline), in seconds."""

    create: bool
    read_only: bool
    busy_timeout: float
    pg_deadline: float
    #: What pools connections between the clients and PostgreSQL: "none" (or session
    #: pooling, which needs nothing) or "transaction" (PgBouncer's pool_mode=transaction).
    pg_pooler: str = "none"
    #: A PostgreSQL read replica for the reads marked as fit for one
    #: (`store.contract.reads`); None: every read goes to the primary.
    pg_read_url: str | None = None


#: Opens the store a setting names.
Opener = Callable[[str, StoreOptions], MemoryStore]


def _memory(url: str, options: StoreOptions) -> MemoryStore:
    from partner_memory.store.memory.store import InMemoryStore

    return InMemoryStore(url.removeprefix("memory://"), read_only=options.read_only)


def _postgres(url: str, options: StoreOptions) -> MemoryStore:
    from partner_memory.store.postgres import PostgresStore

    return PostgresStore(
        url,
        read_only=options.read_only,
        transaction_deadline=options.pg_deadline,
        pooler=options.pg_pooler,
        read_url=options.pg_read_url,
    )


def _sqlite(url: str, options: StoreOptions) -> MemoryStore:
    from partner_memory.store.sqlite import SQLiteStore

    if url.startswith("sqlite://") and not url.startswith("sqlite:///"):
        raise ConfigurationError(f"a SQLite URL is sqlite:///PATH, got {url!r}")
    return SQLiteStore(
        url.removeprefix("sqlite:///"),
        create=options.create,
        busy_timeout=options.busy_timeout,
        read_only=options.read_only,
    )


BUILT_IN: dict[str, Opener] = {
    "memory": _memory,
    "postgresql": _postgres,
    "postgres": _postgres,
    "sqlite": _sqlite,
}


def declared() -> dict[str, EntryPoint]:
    """The schemes other distributions declare (the built-in ones left out)."""
    return {e.name: e for e in entry_points(group=GROUP) if e.name not in BUILT_IN}


def opener(scheme: str) -> Opener:
    """The opener of `scheme`: built in, or declared by an installed distribution."""
    found = BUILT_IN.get(scheme)
    if found is not None:
        return found
    points = declared()
    point = points.get(scheme)
    if point is None:
        known = ", ".join(sorted({*BUILT_IN, *points}))
        raise ConfigurationError(
            f"unsupported database URL scheme {scheme!r} in --db / PARTNER_MEMORY_DB;"
            f" use a SQLite file path or one of: {known} (a backend of another package"
            f" is found once it declares its scheme under the {GROUP!r} entry points)"
        )
    try:
        loaded = point.load()
    except Exception as exc:  # its import failed: say which package and why
        raise ConfigurationError(
            f"the backend for {scheme}:// ({point.value}) could not be loaded: {exc}"
        ) from exc
    if not callable(loaded):
        raise ConfigurationError(f"the backend for {scheme}:// ({point.value}) is not callable")
    return _checked(scheme, point.value, loaded)


def _checked(scheme: str, where: str, opens: Callable[..., object]) -> Opener:
    def checked(url: str, options: StoreOptions) -> MemoryStore:
        store = opens(url, options)
        if not isinstance(store, MemoryStore):
            raise ConfigurationError(
                f"the backend for {scheme}:// ({where}) returned {type(store).__name__},"
                " which does not meet the core store contract"
            )
        return store

    return checked
