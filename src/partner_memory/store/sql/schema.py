"""The schema, as ordered migration steps shared by every SQL backend.

`{serial}` stands for the backend's auto-numbered primary key type. A
statement that must differ per backend is a `PerBackend`. Step i moves a
database from version i to i + 1; add steps at the end, never edit one that
has been released.
"""

from __future__ import annotations

from dataclasses import dataclass

from partner_memory.store.sql.dialect import WINDOW_LOCK_KEY, Dialect

SCHEMA_TABLE = "partner_memory_schema"


@dataclass(frozen=True, slots=True)
class PerBackend:
    """One statement spelled per dialect name; `SKIP` where a backend needs none. Each
    backend must be named: one left out would silently miss the step."""

    sqlite: str
    postgresql: str

    def for_dialect(self, dialect: Dialect) -> str:
        spelled = getattr(self, dialect.name, None)
        if not isinstance(spelled, str):
            raise ValueError(f"migration statement not spelled for {dialect.name}: {self!r}")
        return "" if spelled == SKIP else spelled


#: A `PerBackend` spelling: this backend needs no statement here.
SKIP = "-- nothing for this backend"


Statement = str | PerBackend


def migration_steps(dialect: Dialect) -> list[list[str]]:
    """Every step's statements as `dialect` runs them."""
    steps: list[list[str]] = []
    for step in MIGRATIONS:
        statements = [s.for_dialect(dialect) if isinstance(s, PerBackend) else s for s in step]
        steps.append([s.format(serial=dialect.serial_type) for s in statements if s])
    return steps


#: The tables holding text a forget removes (names, messages, summaries, the window,
#: the rolling log, recall's terms and topics, the recall block, consumers' records):
#: what a purge rewrites.
TEXT_TABLES = (
    "namespaces",
    "messages",
    "slices",
    "trajectory",
    "rollings",
    "recall_docs",
    "topics",
    "activations",
    "consumer_records",
    "items",
)

#: Step 12's table; keys and namespaces compare (and sort) byte by byte on every backend.
_ITEMS = """CREATE TABLE items (
    namespace TEXT{collate} NOT NULL,
    item_key TEXT{collate} NOT NULL,
    value TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    expires_at BIGINT,
    ttl BIGINT,
    message_id TEXT,
    PRIMARY KEY (namespace, item_key)
)"""

#: Step 13's function: `sql_window._append_window`'s transaction, as one call (the
#: shared window lock, the structured prompts dropped, the rows inserted from column
#: arrays, and the window's length and newest interaction before `before_at` after it).
#: A missing namespace fails the insert, as the statements would.
_APPEND_WINDOW = f"""CREATE OR REPLACE FUNCTION pm_append_window(
    ns TEXT, ids TEXT[], roles TEXT[], contents TEXT[], stamps BIGINT[], metas TEXT[],
    flags INTEGER[], interaction_at BIGINT, drop_structured BOOLEAN, before_at BIGINT,
    relaxed BOOLEAN
) RETURNS TABLE (window_length BIGINT, last_before BIGINT)
LANGUAGE plpgsql VOLATILE AS $pm$
DECLARE
    nid BIGINT;
BEGIN
    IF relaxed THEN  -- work behind the callers: its commit need not wait for the flush
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    SELECT n.id INTO nid FROM namespaces n WHERE n.name = ns;
    IF nid IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock_shared({WINDOW_LOCK_KEY}, CAST(nid AS INTEGER));
    END IF;
    IF drop_structured THEN
        DELETE FROM trajectory t WHERE t.namespace_id = nid AND t.structured = 1;
    END IF;
    INSERT INTO trajectory (namespace_id, message_id, role, content, timestamp, metadata,
                            structured, interaction)
        SELECT nid, r.*, interaction_at FROM unnest(ids, roles, contents, stamps, metas, flags) r;
    RETURN QUERY SELECT COUNT(*), MAX(CASE WHEN t.interaction < before_at THEN t.interaction END)
        FROM trajectory t WHERE t.namespace_id = nid;
END
$pm$"""

#: Step 14's `pm_append_window`: step 13's, with the namespace's row as the window's lock.
_ADVISORY = f"""    SELECT n.id INTO nid FROM namespaces n WHERE n.name = ns;
    IF nid IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock_shared({WINDOW_LOCK_KEY}, CAST(nid AS INTEGER));
    END IF;
"""
assert _ADVISORY in _APPEND_WINDOW
_APPEND_WINDOW_ROW_LOCK = _APPEND_WINDOW.replace(
    _ADVISORY, "    SELECT n.id INTO nid FROM namespaces n WHERE n.name = ns FOR KEY SHARE;\n"
)

MIGRATIONS: tuple[tuple[Statement, ...], ...] = (
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
    # step 3: the namespace's state lives in the database, shared by every process -
    # structured prompts in the window, when each window message was an interaction
    # (the last interaction is their maximum: no row every turn must update), the
    # quiet period an idle rolling covered, the rolling lease, the ordered rolling
    # log and its consumers' positions.
    (
        "ALTER TABLE trajectory ADD COLUMN structured INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE trajectory ADD COLUMN interaction BIGINT",
        """UPDATE trajectory SET interaction = (
            SELECT a.last_interaction FROM activity a
            WHERE a.namespace_id = trajectory.namespace_id)
            WHERE pk = (SELECT MAX(t.pk) FROM trajectory t
                        WHERE t.namespace_id = trajectory.namespace_id)""",
        "CREATE INDEX trajectory_interaction ON trajectory (namespace_id, interaction)",
        # structured prompts are rare: every turn's delete of them finds none at once
        "CREATE INDEX trajectory_structured ON trajectory (namespace_id) WHERE structured = 1",
        "ALTER TABLE activity ADD COLUMN idle_rolled_for BIGINT NOT NULL DEFAULT -1",
        "ALTER TABLE namespaces ADD COLUMN rolling_seq BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE rollings ADD COLUMN seq BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE rollings ADD COLUMN rolling_size BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE rollings ADD COLUMN retain_divisor BIGINT",
        "ALTER TABLE rollings ADD COLUMN unit_slices BIGINT NOT NULL DEFAULT 0",
        # which process rolled (host:pid:service), for inspection
        "ALTER TABLE rollings ADD COLUMN holder TEXT",
        """UPDATE rollings SET seq = (
            SELECT COUNT(*) FROM rollings r WHERE r.namespace_id = rollings.namespace_id
            AND r.pk <= rollings.pk)""",
        """UPDATE namespaces SET rolling_seq = (
            SELECT COUNT(*) FROM rollings r WHERE r.namespace_id = namespaces.id)""",
        "CREATE UNIQUE INDEX rollings_log ON rollings (namespace_id, seq)",
        """CREATE TABLE rolling_leases (
            namespace_id BIGINT PRIMARY KEY,
            holder TEXT NOT NULL,
            expires_at BIGINT NOT NULL
        )""",
        """CREATE TABLE consumers (
            name TEXT NOT NULL,
            namespace_id BIGINT NOT NULL,
            durable INTEGER NOT NULL,
            position BIGINT NOT NULL DEFAULT 0,
            failures BIGINT NOT NULL DEFAULT 0,
            last_error TEXT,
            last_failure_at BIGINT,
            PRIMARY KEY (name, namespace_id)
        )""",
        "CREATE INDEX consumers_by_namespace ON consumers (namespace_id)",
    ),
    # Step 4: costs that follow what an operation touches, not the namespace's size.
    # A namespace keeps its unit and slice counts (listing namespaces and paging
    # units counted every unit), and slices know their namespace, so its newest slices (the
    # context a memory opens with) are read from an index, not sorted.
    (
        "ALTER TABLE namespaces ADD COLUMN unit_count BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE namespaces ADD COLUMN slice_count BIGINT NOT NULL DEFAULT 0",
        """UPDATE namespaces SET unit_count = (
            SELECT COUNT(*) FROM units u WHERE u.namespace_id = namespaces.id)""",
        """UPDATE namespaces SET slice_count = (
            SELECT COUNT(*) FROM slices s JOIN units u ON u.pk = s.unit_pk
            WHERE u.namespace_id = namespaces.id)""",
        "ALTER TABLE slices ADD COLUMN namespace_id BIGINT NOT NULL DEFAULT 0",
        """UPDATE slices SET namespace_id = (
            SELECT u.namespace_id FROM units u WHERE u.pk = slices.unit_pk)""",
        "CREATE INDEX slices_newest ON slices (namespace_id, timestamp DESC, pk DESC)",
        # Messages are found by id through an 8-byte key (the id's MD5, first 64 bits)
        # instead of an index holding every 36-character id again: ~20 bytes less per
        # message, and whatever shape ids have, a lookup reads the rows of its key only.
        "ALTER TABLE messages ADD COLUMN id_key BIGINT NOT NULL DEFAULT 0",
        PerBackend(
            sqlite="UPDATE messages SET id_key = pm_id_key(message_id)",
            postgresql="UPDATE messages SET id_key ="
            " CAST(CAST('x' || substr(md5(message_id), 1, 16) AS BIT(64)) AS BIGINT)",
        ),
        "DROP INDEX messages_by_id",
        "CREATE INDEX messages_by_key ON messages (id_key)",
    ),
    # Step 5: the recall index's rows - each stored message's analysed terms, written
    # by the "recall" durable consumer with the log sequence number of its rolling
    # (0 when written by a reindex); a reindex bumps the namespace's generation, so
    # processes holding the index in memory rebuild it.
    (
        """CREATE TABLE recall_docs (
            unit_pk BIGINT NOT NULL,
            position BIGINT NOT NULL,
            namespace_id BIGINT NOT NULL,
            seq BIGINT NOT NULL,
            speaker TEXT,
            timestamp BIGINT,
            terms TEXT NOT NULL,
            PRIMARY KEY (unit_pk, position)
        )""",
        "CREATE INDEX recall_docs_by_seq ON recall_docs (namespace_id, seq, unit_pk, position)",
        "ALTER TABLE namespaces ADD COLUMN recall_generation BIGINT NOT NULL DEFAULT 0",
        # what was forgotten and when - never the content - so an operator can show it
        """CREATE TABLE forgets (
            pk {serial},
            namespace TEXT NOT NULL,
            kind TEXT NOT NULL,
            target TEXT NOT NULL,
            at BIGINT NOT NULL
        )""",
        "CREATE INDEX forgets_by_namespace ON forgets (namespace, pk)",
    ),
    # Step 6: recall's dense vectors - a stored message's meaning as signed bytes,
    # beside its terms - and which embedder made a namespace's vectors (vectors of
    # different models are never compared; NULL: nothing indexed yet).
    (
        PerBackend(
            sqlite="ALTER TABLE recall_docs ADD COLUMN vector BLOB",
            postgresql="ALTER TABLE recall_docs ADD COLUMN vector BYTEA",
        ),
        "ALTER TABLE namespaces ADD COLUMN recall_embedder TEXT",
    ),
    # Step 7: topic paths ("project->partner->memory") of slices, written by the
    # "topics" durable consumer when an LLM is configured; with the slice's range,
    # so recall can keep to a topic's messages without reading the slices.
    (
        """CREATE TABLE topics (
            namespace_id BIGINT NOT NULL,
            unit_pk BIGINT NOT NULL,
            slice_id TEXT NOT NULL,
            start_index BIGINT NOT NULL,
            end_index BIGINT NOT NULL,
            path TEXT NOT NULL,
            PRIMARY KEY (unit_pk, slice_id, path)
        )""",
        "CREATE INDEX topics_by_path ON topics (namespace_id, path)",
    ),
    # Step 8: API keys of the HTTP service - only a hash of each secret is kept;
    # `namespaces` is a glob ("agent-42/*"), `scope` read, write or admin.
    (
        """CREATE TABLE api_keys (
            pk {serial},
            key_id TEXT NOT NULL UNIQUE,
            secret_hash TEXT NOT NULL,
            namespaces TEXT NOT NULL,
            scope TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            revoked_at BIGINT
        )""",
    ),
    # Step 9: what the latest recall left in a namespace's context (its block's
    # renderings and what they quote, so a forget can take it away): the context is
    # derived from the database, the same in every process and after a restart.
    (
        """CREATE TABLE activations (
            namespace_id BIGINT PRIMARY KEY,
            at BIGINT NOT NULL,
            full_text TEXT NOT NULL,
            compact_text TEXT,
            abstract_text TEXT,
            message_ids TEXT NOT NULL,
            slice_keys TEXT NOT NULL
        )""",
    ),
    # Step 10: the tables of durable consumers that keep memory's text, and the
    # columns that say whose it is: a forget, in any process, deletes their rows.
    (
        """CREATE TABLE consumer_text (
            consumer TEXT NOT NULL,
            table_name TEXT NOT NULL,
            namespace_column TEXT NOT NULL,
            unit_column TEXT,
            slice_column TEXT,
            message_column TEXT,
            PRIMARY KEY (consumer, table_name)
        )""",
    ),
    # Step 11: durable consumers keep their own records here, through typed writes
    # (they never see the database); each says what memory it was drawn from, so a
    # forget removes it. The SQL tables step 10 declared are no longer written to.
    (
        "DROP TABLE consumer_text",
        PerBackend(
            sqlite="""CREATE TABLE consumer_records (
                namespace_id BIGINT NOT NULL,
                consumer TEXT NOT NULL,
                record_key TEXT NOT NULL,
                value TEXT NOT NULL,
                unit_id TEXT,
                slice_id TEXT,
                message_id TEXT,
                PRIMARY KEY (namespace_id, consumer, record_key)
            )""",
            postgresql="""CREATE TABLE consumer_records (
                namespace_id BIGINT NOT NULL,
                consumer TEXT NOT NULL,
                record_key TEXT COLLATE "C" NOT NULL,
                value TEXT NOT NULL,
                unit_id TEXT,
                slice_id TEXT,
                message_id TEXT,
                PRIMARY KEY (namespace_id, consumer, record_key)
            )""",
        ),
        "CREATE INDEX consumer_records_by_unit ON consumer_records (namespace_id, unit_id)",
        "CREATE INDEX consumer_records_by_message ON consumer_records (namespace_id, message_id)",
    ),
    # Step 12: values under exact keys (a LangGraph store's items), each one row; the
    # namespace is the adapter's name for it, compared byte by byte; `message_id` names
    # the message recall finds it by (a forget of that message deletes the item).
    (
        PerBackend(
            sqlite=_ITEMS.format(collate=""),
            postgresql=_ITEMS.format(collate=' COLLATE "C"'),  # byte order, as SQLite's
        ),
        "CREATE INDEX items_by_update ON items (namespace, updated_at DESC)",
        "CREATE INDEX items_by_message ON items (namespace, message_id)"
        " WHERE message_id IS NOT NULL",
        "CREATE INDEX items_expiring ON items (expires_at) WHERE expires_at IS NOT NULL",
    ),
    # Step 13: PostgreSQL appends a turn to the window in one statement, run as its own
    # transaction: no BEGIN, no COMMIT, half the client's CPU per turn.
    (PerBackend(sqlite=SKIP, postgresql=_APPEND_WINDOW),),
    # Step 14: ready to shard by namespace - messages carry their namespace as every
    # other per-namespace table does, so every statement on them names it.
    (
        "ALTER TABLE messages ADD COLUMN namespace_id BIGINT NOT NULL DEFAULT 0",
        "UPDATE messages SET namespace_id ="
        " (SELECT u.namespace_id FROM units u WHERE u.pk = messages.unit_pk)",
        # a unit's slices by both keys (with the namespace alone, a planner without
        # statistics may walk the namespace's newest slices instead)
        "CREATE INDEX slices_of_unit ON slices (unit_pk, namespace_id, timestamp, pk)",
        "DROP INDEX slices_by_time",
        # the window's lock becomes the namespace's row (`Dialect.window_lock`)
        PerBackend(sqlite=SKIP, postgresql=_APPEND_WINDOW_ROW_LOCK),
    ),
)
