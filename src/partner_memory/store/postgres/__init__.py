"""`postgresql://`: the server backend (psycopg 3 and a pool), its purge and its replays."""

from partner_memory.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
