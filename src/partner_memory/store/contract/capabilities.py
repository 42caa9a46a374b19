"""Optional capabilities of a store, each a small protocol of its own.

A backend implements the core layers (`store.base`); it may also keep API
keys, durable consumers' records, topic paths, recall rows, forgets, dumps,
the inspector's figures and the operator's health figures.
Each capability is detected from what the backend implements (`supports`),
and a caller that cannot do without one asks for it (`require`), which names
the missing capability instead of failing on an absent method later.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, NamedTuple, Protocol, TypeVar, runtime_checkable

from partner_memory.errors import ConfigurationError
from partner_memory.model import (
    Message,
    NamespaceOverview,
    RollingRecord,
    RollingTotals,
    check_limit,
    check_text,
)


class Capability(StrEnum):
    """How a backend may be deployed, as it declares; a test marked with one it lacks is
    skipped. (Optional verbs are not declared: see `store.capabilities`.)"""

    #: Several hosts may open the store at once (not just processes of one machine).
    SHARED_ACROSS_HOSTS = "shared_across_hosts"


class RecallRow(NamedTuple):
    """One stored message as the recall index keeps it: where it is, and its terms."""

    unit_id: str
    position: int
    #: The rolling (log sequence number) that stored it; 0 when written by a reindex.
    seq: int
    speaker: str | None
    timestamp: int | None
    #: Its analysed terms, space-separated.
    terms: str
    #: Its meaning as signed bytes (`recall.embed`), None when no embedder made one.
    vector: bytes | None = None
    #: The message's role and metadata (JSON text, None when empty), read with the row
    #: from the message itself, so recall's filters need no copy of them.
    role: str | None = None
    metadata: str | None = None
    #: Whether the message only asks (its text ends in a question mark), read with it
    #: too: meaning finds a question nearest another question, and an answer is wanted.
    asks: bool = False


#: A question's last mark, in Latin and in CJK text.
QUESTION_MARKS = ("?", "\uff1f")


def asks(text: str) -> bool:
    """Whether a message only asks (`RecallRow.asks`): its text ends in a question mark.
    `text` may be the text's tail alone (the SQL backends read its last characters)."""
    return text.rstrip().endswith(QUESTION_MARKS)


class Located(NamedTuple):
    """Where a stored message is."""

    message_id: str
    unit_id: str
    position: int


class Resummary(NamedTuple):
    """A slice's new summary, made from what remains of it after a forget."""

    unit_id: str
    slice_id: str
    summary: str
    summarizer: str | None


class RecallState(NamedTuple):
    """What a process holding a namespace's recall index in memory checks it against."""

    #: Bumped by each reindex: a cached index of another generation is rebuilt.
    generation: int
    #: The last rolling whose messages are in `recall_docs`...
    indexed: int
    #: ...and the namespace's newest rolling (the rest is read from the log).
    head: int
    #: The embedder whose vectors the rows hold (None: nothing indexed yet).
    embedder: str | None = None


class StoredKey(NamedTuple):
    """An API key as the store keeps it: never the secret, only its hash."""

    key_id: str
    secret_hash: str
    namespaces: str
    scope: str
    created_at: int
    revoked_at: int | None


class TopicSlice(NamedTuple):
    """A slice filed under a topic path, with the range of messages it covers."""

    unit_id: str
    slice_id: str
    start_index: int
    end_index: int
    path: str


class RecallAnalyzer(Protocol):
    """What turns messages into recall rows (`recall.analyze.RecallAnalysis`)."""

    @property
    def embedder_name(self) -> str: ...

    def rows(self, messages: Sequence[Message]) -> list[tuple[str | None, str, bytes | None]]:
        """Each message's speaker, space-separated terms and vector."""
        ...


@dataclass(frozen=True, slots=True)
class NamespaceDump:
    """Every row of one namespace, without the store's own keys: what `copy` carries."""

    name: str
    memory_session_id: str
    rolling_seq: int
    units: list[tuple[Any, ...]]
    messages: list[tuple[Any, ...]]
    slices: list[tuple[Any, ...]]
    window: list[tuple[Any, ...]]
    activity: tuple[Any, ...] | None
    rollings: list[tuple[Any, ...]]
    consumers: list[tuple[Any, ...]]
    #: Durable consumers' records (consumer, key, JSON value, unit, slice, message).
    records: list[tuple[Any, ...]] = field(default_factory=list)
    #: Items of the namespace (key, JSON value, created, updated, expires, ttl, message).
    items: list[tuple[Any, ...]] = field(default_factory=list)


#: The item under which a namespace keeps the blocks it holds in context (`held_blocks`).
HELD_BLOCKS_KEY = "partner.held-blocks"


class StoredItem(NamedTuple):
    """A value kept under an exact key (a LangGraph store's item): the store is its
    authority; a message of the same namespace, when it has one, is how recall finds it."""

    #: The item's namespace: a name the store compares exactly, not necessarily one of
    #: memory's namespaces (it is one when the item has a message).
    namespace: str
    key: str
    #: The value, as JSON text.
    value: str
    created_at: int
    updated_at: int
    #: When it stops being found (ms); None: never.
    expires_at: int | None = None
    #: The time to live a read may renew `expires_at` by (ms); None: no refreshing.
    ttl: int | None = None
    #: The message recall finds it by (None: not searchable by its words).
    message_id: str | None = None

    def live(self, now: int) -> bool:
        """Whether it is still found at `now` (ms)."""
        return self.expires_at is None or self.expires_at > now


@runtime_checkable
class ItemStore(Protocol):
    """Values kept by namespace and exact key, each a row of its own; an item whose
    message is forgotten (by message, unit or namespace) goes with it."""

    def put_item(self, item: StoredItem) -> StoredItem | None:
        """Write `item` over the one at its namespace and key (an unexpired one keeps its
        `created_at`); the row replaced, expired or not (None: there was none)."""
        ...

    def delete_item(self, namespace: str, key: str) -> StoredItem | None:
        """Delete an item; the one deleted (None: there was none)."""
        ...

    def get_items(
        self, namespace: str, keys: Sequence[str], *, now: int, refresh: bool = False
    ) -> list[StoredItem]:
        """The unexpired items of `namespace` among `keys`; with `refresh`, those with a
        `ttl` expire `ttl` after `now` (and are returned so)."""
        ...

    def list_items(
        self, prefix: str, *, now: int, limit: int | None = None, offset: int = 0
    ) -> list[StoredItem]:
        """The unexpired items of the namespaces starting with `prefix`, the latest
        updated first (then by namespace and key), from the `offset`-th on, `limit` at
        most (None: all)."""
        ...

    def item_namespaces(self, *, now: int, prefix: str = "") -> list[str]:
        """The namespaces starting with `prefix` that hold an unexpired item, sorted."""
        ...

    def expire_items(self, *, now: int, limit: int = 1000) -> list[StoredItem]:
        """Delete up to `limit` items whose time ran out; the ones deleted."""
        ...


@runtime_checkable
class KeyStore(Protocol):
    """API keys of the HTTP service (`keys.KeyRing`): only a hash of each secret."""

    def add_api_key(self, key: StoredKey) -> None:
        """Store a new key (its id must be new)."""
        ...

    def api_keys(self) -> list[StoredKey]:
        """Every key, revoked ones too, oldest first."""
        ...

    def find_api_key(self, key_id: str) -> StoredKey | None: ...

    def revoke_api_key(self, key_id: str, *, at: int) -> bool:
        """Revoke a key; False if there is no such key (revoking twice is not an error)."""
        ...


@runtime_checkable
class TopicStore(Protocol):
    """Topic paths of slices, written by the "topics" follower (`FiledTopics`)."""

    def topic_paths(self, namespace: str, *, limit: int = 100) -> list[tuple[str, int]]:
        """The namespace's topic paths with the number of slices under each, most first."""
        ...

    def topic_slices(self, namespace: str, path: str) -> list[TopicSlice]:
        """The slices filed under `path` or below it (`path->...`), oldest first."""
        ...


@runtime_checkable
class RecallStore(Protocol):
    """Recall rows of stored messages, written by the "recall" follower (`IndexedMessages`)."""

    def recall_state(self, namespace: str, consumer: str) -> RecallState: ...

    def recall_rows(
        self, namespace: str, after: int, through: int, *, offset: int = 0, limit: int | None = None
    ) -> list[RecallRow]:
        """Recall rows written by rollings `after` < seq <= `through`, in log order (then
        unit and position), from the `offset`-th on, `limit` at most (None: all). Rows of
        rollings up to `through` are never reordered, so pages read one after another
        (a rebuild's, bounded in memory) are exact."""
        ...

    def reindex_recall(self, namespace: str, consumer: str, analysis: RecallAnalyzer) -> int:
        """Rebuild the namespace's recall rows from its units in one transaction (`analysis`
        gives messages' speakers, terms and vectors), set `consumer` to the log head, record
        the embedder and bump the generation. Returns the number of messages indexed."""
        ...


class StoredRecord(NamedTuple):
    """A consumer's record as read back."""

    key: str
    value: Any
    unit: str | None
    slice: str | None
    message: str | None


@dataclass(frozen=True, slots=True)
class RecordQuery:
    """Which of a consumer's records to read: those whose key begins with `prefix`, after
    the key `after`, at most `limit`, by key (code-point order)."""

    consumer: str
    prefix: str = ""
    after: str | None = None
    limit: int = 100

    def __post_init__(self) -> None:
        check_text(self.consumer, "consumer")
        check_text(self.prefix, "prefix")
        if self.after is not None:
            check_text(self.after, "after")
        check_limit(self.limit)


@runtime_checkable
class RecordStore(Protocol):
    """Durable consumers' own records (`Record`, `Unrecord`), written with their position."""

    def read_records(self, namespace: str, query: RecordQuery) -> list[StoredRecord]: ...


class MessagesForget(NamedTuple):
    """A forget of messages as the store writes it: their ids, the new summaries of the
    slices that held them (`Resummary`), and when (ms)."""

    message_ids: Sequence[str]
    resummaries: Sequence[Resummary]
    at: int


@runtime_checkable
class ForgetStore(Protocol):
    """Forgetting: a message's text, a unit or a namespace leaves every path, recorded."""

    def locate_messages(self, namespace: str, message_ids: Sequence[str]) -> list[Located]:
        """Where the stored ones among `message_ids` are (unit and position)."""
        ...

    def forget_messages(self, namespace: str, forget: MessagesForget) -> int:
        """In one transaction: blank the stored messages (the rows keep their ids and
        positions), drop them from the window and the recall rows, give the slices
        their new summaries, move the namespace's generation on and record the forget
        (at `forget.at`).
        Returns how many were found; NotFoundError when none was."""
        ...

    def forget_unit(self, namespace: str, unit_id: str, *, at: int) -> None:
        """Delete a unit, its messages, slices, recall rows and log entries; recorded."""
        ...

    def forget_namespace(self, namespace: str, *, at: int) -> None:
        """Delete a namespace and everything in it; recorded (by name) in `forget_log`."""
        ...

    def forget_log(self, namespace: str, *, limit: int = 100) -> list[tuple[str, str, int]]:
        """(kind, target, at) of the namespace's forgets, newest first - never content."""
        ...

    def forgotten_messages(self, namespace: str, message_ids: Sequence[str]) -> set[str]:
        """Which of these ids a forget of messages named: an adapter re-reading a
        conversation (Google ADK's add_session_to_memory) does not record them again."""
        ...

    def purge(self) -> list[str]:
        """Remove what forgets deleted from the database's files too, where a delete alone
        leaves it there; returns what was rewritten. An operator's job: it may lock tables."""
        ...


@runtime_checkable
class DumpStore(Protocol):
    """Every row of one namespace out of one store and into another (`copy`)."""

    def export_namespace(self, namespace: str) -> NamespaceDump:
        """Every row of a namespace, in one read transaction."""
        ...

    def import_namespace(self, dump: NamespaceDump) -> None:
        """Write a dump as a new namespace, all or nothing; ConflictError if it exists."""
        ...


@dataclass(frozen=True, slots=True)
class NamespaceQuery:
    """A page of namespaces by name: `search` keeps the names holding it (any case),
    `matching` those a glob matches (`fnmatchcase`); `after` a name, the next `limit`."""

    limit: int
    after: str | None = None
    search: str | None = None
    matching: str | None = None

    def __post_init__(self) -> None:
        check_limit(self.limit)
        for name in ("after", "search", "matching"):
            if getattr(self, name) is not None:
                check_text(getattr(self, name), name)


@runtime_checkable
class InspectionStore(Protocol):
    """The inspector's and `stats`' figures, each one query however large the memory."""

    def namespace_overviews(self, query: NamespaceQuery) -> list[NamespaceOverview]:
        """Namespaces by name with their figures, as `query` picks them."""
        ...

    def rolling_history(
        self, namespace: str, *, limit: int, before: int | None = None
    ) -> list[RollingRecord]:
        """Rollings newest first, with their cost; `before` a seq, the `limit` older ones."""
        ...

    def rolling_totals(self, namespace: str) -> RollingTotals: ...


class StoreHealth(NamedTuple):
    """What an operator alerts on, over every namespace of a store, read at one moment."""

    namespaces: int
    #: Messages in every window (not rolled yet), and in the longest one.
    window_messages: int
    longest_window: int
    #: Rolling leases whose expiry is still ahead, and those that lapsed (a dead holder's).
    leases_held: int
    leases_expired: int
    #: Per durable consumer (any that ever followed the log here): rollings of every
    #: namespace it has not applied yet, and the namespaces it is behind in.
    consumer_lag: dict[str, tuple[int, int]]


@runtime_checkable
class HealthStore(Protocol):
    """The figures of `/metrics`: each one aggregate query, whatever the memory's size."""

    def store_health(self) -> StoreHealth:
        """Read now (leases judged by the database's own clock)."""
        ...


C = TypeVar("C")

#: Every optional capability, by the name errors and docs use.
CAPABILITIES: dict[str, type[Any]] = {
    "keys": KeyStore,
    "records": RecordStore,
    "topics": TopicStore,
    "recall rows": RecallStore,
    "forgetting": ForgetStore,
    "dumps": DumpStore,
    "inspection": InspectionStore,
    "items": ItemStore,
    "health": HealthStore,
}


class Need(Generic[C]):
    """A capability as a value mypy carries (a protocol class cannot be passed where a
    concrete type is expected, python/mypy#4717): `require(store, ITEMS)` is an
    `ItemStore`. The protocol classes themselves work too, untyped."""

    __slots__ = ("protocol",)

    def __init__(self, protocol: Any) -> None:
        self.protocol = protocol


KEYS: Need[KeyStore] = Need(KeyStore)
TOPICS: Need[TopicStore] = Need(TopicStore)
RECORDS: Need[RecordStore] = Need(RecordStore)
RECALL_ROWS: Need[RecallStore] = Need(RecallStore)
FORGETTING: Need[ForgetStore] = Need(ForgetStore)
DUMPS: Need[DumpStore] = Need(DumpStore)
INSPECTION: Need[InspectionStore] = Need(InspectionStore)
ITEMS: Need[ItemStore] = Need(ItemStore)
HEALTH: Need[HealthStore] = Need(HealthStore)


def _protocol(capability: Any) -> Any:
    return capability.protocol if isinstance(capability, Need) else capability


def supports(store: object, capability: Need[C] | type[C]) -> bool:
    """Whether `store` implements every verb of `capability` (a protocol above)."""
    return isinstance(store, _protocol(capability))


def require(store: object, capability: Need[C] | type[C]) -> C:
    """`store` as `capability`, or ConfigurationError naming what it lacks."""
    protocol = _protocol(capability)
    if isinstance(store, protocol):
        found: C = store
        return found
    name = next((n for n, c in CAPABILITIES.items() if c is protocol), protocol.__name__)
    raise ConfigurationError(f"{type(store).__name__} does not offer {name} ({protocol.__name__})")


def offered(store: object) -> list[str]:
    """The names of the optional capabilities `store` offers."""
    return [name for name, capability in CAPABILITIES.items() if isinstance(store, capability)]
