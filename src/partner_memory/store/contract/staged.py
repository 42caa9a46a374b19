"""What a durable consumer writes: typed writes, applied by the store with its position.

A consumer never sees the database. For each rolling it returns what it wants
written - its own records (`Record`, `Unrecord`), or, for the built-in
followers, the capability rows they keep (`IndexedMessages`, `FiledTopics`) -
and the store writes them in the transaction that moves the consumer's
position on, so a crash repeats or skips nothing. Each write says what memory
it was drawn from; a forget removes it in its own transaction, in any process.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from partner_memory.errors import InvalidInputError
from partner_memory.model import LogEntry, check_text
from partner_memory.store.contract.capabilities import (
    RecallStore,
    RecordStore,
    TopicStore,
)

#: Longest record key, in characters.
MAX_RECORD_KEY_CHARS = 512

log = logging.getLogger(__name__)
_warned: set[tuple[str, str]] = set()


def _owner(value: object, what: str) -> None:
    if value is not None:
        check_text(value, what)


@dataclass(frozen=True, slots=True)
class Record:
    """A consumer's own row: a JSON `value` under `key` (unique per consumer and namespace;
    writing a key again replaces it). `unit`, `slice` and `message` name the memory it was
    drawn from: a forget of that message removes it, else a forget of anything in that
    slice, else of anything in that unit. A record naming none is never forgotten but
    with its namespace: keep memory's text out of it."""

    key: str
    value: Any
    unit: str | None = None
    slice: str | None = None
    message: str | None = None

    def __post_init__(self) -> None:
        check_text(self.key, "record key")
        if not self.key or len(self.key) > MAX_RECORD_KEY_CHARS:
            raise InvalidInputError(f"a record key has 1 to {MAX_RECORD_KEY_CHARS} characters")
        _owner(self.unit, "record unit")
        _owner(self.slice, "record slice")
        _owner(self.message, "record message")
        if self.slice is not None and self.unit is None:
            raise InvalidInputError(f"record {self.key!r} names a slice without its unit")

    def encoded(self) -> str:
        """The value as stored: JSON text (InvalidInputError if it is not JSON)."""
        try:
            text = json.dumps(self.value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"record {self.key!r}: value is not JSON ({exc})") from None
        return check_text(text, f"record {self.key!r} value")


@dataclass(frozen=True, slots=True)
class Unrecord:
    """Delete the consumer's record under `key` (nothing if there is none)."""

    key: str


#: A message's recall row: who said it, its terms space-separated, its packed vector
#: (None: indexed by words only).
RecallRow = tuple[str | None, str, bytes | None]


@dataclass(frozen=True, slots=True)
class IndexedMessages:
    """The recall rows of the rolling's messages: each one's speaker, space-separated
    terms and vector (None: words only), made by the embedder `embedder`. A namespace
    holding another embedder's vectors keeps these by words only until a reindex."""

    rows: Sequence[RecallRow]
    embedder: str


@dataclass(frozen=True, slots=True)
class FiledTopics:
    """The topic paths the rolling's slice is filed under."""

    paths: Sequence[str]


#: What `DurableConsumer.apply` may return.
Staged = Record | Unrecord | IndexedMessages | FiledTopics


def checked(writes: object, consumer: str, store: object) -> Sequence[Staged]:
    """What `apply` returned, refused with a clear error unless it is staged writes that
    `store` keeps: each kind (records, recall rows, topics) only where the store offers
    its capability, never dropped in silence."""
    if writes is None:
        return ()
    if not isinstance(writes, Sequence) or isinstance(writes, str | bytes):
        raise InvalidInputError(
            f"consumer {consumer!r}: apply must return a list of writes, got"
            f" {type(writes).__name__}"
        )
    for write in writes:
        if not isinstance(write, Record | Unrecord | IndexedMessages | FiledTopics):
            raise InvalidInputError(
                f"consumer {consumer!r}: apply returned {type(write).__name__}; return"
                " Record, Unrecord, IndexedMessages or FiledTopics"
            )
        kept = _CAPABILITY_ROWS.get(type(write))
        if kept is not None and not isinstance(store, kept):
            raise InvalidInputError(
                f"consumer {consumer!r}: {type(store).__name__} does not offer"
                f" {kept.__name__}, so it keeps no {type(write).__name__}"
            )
    return writes


#: What `advance_consumer` writes: each rolling, with what its consumer staged for it.
StagedRollings = Sequence[tuple[LogEntry, Sequence[Staged]]]


def checked_rollings(
    staged: StagedRollings, consumer: str, store: object
) -> list[tuple[LogEntry, Sequence[Staged]]]:
    """Each rolling's staged writes `checked` before a backend writes any of them."""
    return [(entry, checked(done, consumer, store)) for entry, done in staged]


def keeps_vectors(namespace: str, held: str | None, given: str) -> bool:
    """Whether rows embedded by `given` keep their vectors in a namespace whose vectors are
    `held`'s (None: none yet, these become its own); else they are indexed by words."""
    if held is None or held == given:
        return True
    if (namespace, given) not in _warned:
        _warned.add((namespace, given))
        log.warning(
            "namespace %r holds vectors of %s, this service embeds with %s: new messages"
            " are indexed by words only until `partner-memory reindex`",
            namespace,
            held,
            given,
        )
    return False


def check_rows(write: IndexedMessages, entry: LogEntry) -> None:
    """One recall row per message of the rolling, or InvalidInputError."""
    if len(write.rows) != len(entry.messages):
        raise InvalidInputError(
            f"IndexedMessages holds {len(write.rows)} rows for {len(entry.messages)} messages"
        )


#: The capability each capability row belongs to.
_CAPABILITY_ROWS: dict[type, type] = {
    Record: RecordStore,
    Unrecord: RecordStore,
    IndexedMessages: RecallStore,
    FiledTopics: TopicStore,
}
