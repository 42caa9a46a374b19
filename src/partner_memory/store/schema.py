"""The schema, as ordered migration steps shared by every SQL backend.

`{serial}` stands for the backend's auto-numbered primary key type. Step i
moves a database from version i to i + 1; add steps at the end, never edit
one that has been released.
"""

from __future__ import annotations

SCHEMA_TABLE = "partner_memory_schema"

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE namespaces (
            id {serial},
            name TEXT NOT NULL UNIQUE,
            memory_session_id TEXT NOT NULL
        )""",
        """CREATE TABLE units (
            pk {serial},
            namespace_id BIGINT NOT NULL REFERENCES namespaces (id) ON DELETE CASCADE,
            unit_id TEXT NOT NULL,
            timestamp BIGINT NOT NULL,
            message_count BIGINT NOT NULL,
            slice_count BIGINT NOT NULL,
            UNIQUE (namespace_id, unit_id)
        )""",
        "CREATE INDEX units_by_time ON units (namespace_id, timestamp DESC, pk DESC)",
        # messages and slices carry no foreign key: rows are only ever inserted for
        # a unit read in the same transaction, and a per-row key check doubled the
        # cost of an append on PostgreSQL
        """CREATE TABLE messages (
            unit_pk BIGINT NOT NULL,
            position BIGINT NOT NULL,
            message_id TEXT NOT NULL,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            timestamp BIGINT,
            metadata TEXT,
            PRIMARY KEY (unit_pk, position)
        )""",
        """CREATE TABLE slices (
            pk {serial},
            unit_pk BIGINT NOT NULL,
            slice_id TEXT NOT NULL,
            start_index BIGINT NOT NULL,
            end_index BIGINT NOT NULL,
            summary TEXT NOT NULL,
            timestamp BIGINT NOT NULL,
            UNIQUE (unit_pk, slice_id)
        )""",
        "CREATE INDEX slices_by_time ON slices (unit_pk, timestamp, pk)",
    ),
    # step 2: what the rolling pipeline keeps - the trajectory (the agent's current
    # window), the last interaction time, which summariser wrote a slice, and a
    # record of every rolling with its LLM cost.
    (
        # its own row, so recording a turn never waits for the namespace lock a
        # rolling holds while it writes a slice
        """CREATE TABLE activity (
            namespace_id BIGINT PRIMARY KEY REFERENCES namespaces (id) ON DELETE CASCADE,
            last_interaction BIGINT NOT NULL
        )""",
        "ALTER TABLE slices ADD COLUMN summarizer TEXT",
        # no foreign key here either: a per-row key check is most of a turn's cost
        """CREATE TABLE trajectory (
            pk {serial},
            namespace_id BIGINT NOT NULL,
            message_id TEXT NOT NULL,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            timestamp BIGINT,
            metadata TEXT,
            UNIQUE (namespace_id, message_id)
        )""",
        "CREATE INDEX messages_by_id ON messages (message_id)",
        """CREATE TABLE rollings (
            pk {serial},
            namespace_id BIGINT NOT NULL REFERENCES namespaces (id) ON DELETE CASCADE,
            unit_id TEXT NOT NULL,
            slice_id TEXT NOT NULL,
            started_at BIGINT NOT NULL,
            idle INTEGER NOT NULL,
            messages BIGINT NOT NULL,
            summarizer TEXT NOT NULL,
            llm_calls BIGINT NOT NULL,
            prompt_tokens BIGINT NOT NULL,
            completion_tokens BIGINT NOT NULL,
            llm_ms DOUBLE PRECISION NOT NULL,
            pipeline_ms DOUBLE PRECISION NOT NULL,
            fallbacks TEXT NOT NULL
        )""",
        "CREATE INDEX rollings_by_namespace ON rollings (namespace_id, pk)",
    ),
)
