"""The store's default timeouts, shared by the backends and the settings that open them."""

#: Seconds a SQLite writer waits for another writer's lock before giving up.
DEFAULT_BUSY_TIMEOUT = 10.0
#: Seconds a PostgreSQL transaction may go without an answer from the server.
DEFAULT_PG_DEADLINE = 60.0
