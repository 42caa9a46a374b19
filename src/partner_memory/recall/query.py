"""One recall question as a value, built once by whichever interface was asked.

The handle, aio, both clients, MCP, HTTP and the CLI build a `RecallQuery`
and pass it on untouched; the engine and the searcher read it. A new filter
is a field of `RecallFilter` (and a key of `RecallOptions`, for the typed
keyword conveniences): nothing in between is edited, because the layers
pass the value and its wire form (`to_dict`/`from_dict`) is derived from the
fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypedDict, Unpack, get_origin, get_type_hints

from partner_memory.errors import InvalidInputError
from partner_memory.model import check_text, check_timestamp
from partner_memory.recall.filters import RecallFilter

#: The most messages one recall returns.
MAX_K = 100

#: The wire names of the filter's fields (flat in a request body, beside `query`).
FILTER_FIELDS = tuple(f.name for f in fields(RecallFilter))


@dataclass(frozen=True, slots=True)
class WireField:
    """A filter as an interface with a schema (HTTP's body, MCP's tool) declares it."""

    name: str
    kind: Any
    description: str
    min_length: int | None
    max_length: int | None


def filter_fields() -> list[WireField]:
    """The filter's fields, each optional on the wire (a mapping travels as an object)."""
    hints = get_type_hints(RecallFilter)
    out = []
    for spec in fields(RecallFilter):
        kind = hints[spec.name]
        if get_origin(kind) is Mapping:
            kind = dict[str, Any]
        told = spec.metadata
        bounds = told["min_length"], told["max_length"]
        out.append(WireField(spec.name, kind | None, told["description"], *bounds))
    return out


class RecallOptions(TypedDict, total=False):
    """The keyword form of a `RecallQuery` (the handle's and the clients' conveniences)."""

    k: int
    since: int | None
    until: int | None
    dates: bool
    topic: str | None
    role: str | None
    speaker: str | None
    unit: str | None
    metadata: Mapping[str, Any] | None
    activate: bool


@dataclass(frozen=True, slots=True)
class RecallQuery:
    """What to look for and where: the `k` best messages for `query`; `since`
    (inclusive) and `until` (exclusive) keep to those times (ms); with `dates`, a
    date in the query is read as a time; `topic` keeps to a topic path; `where`
    keeps to a role, speaker, unit or metadata; with `activate`, what is found
    enters the namespace's context."""

    query: str
    k: int = 10
    since: int | None = None
    until: int | None = None
    dates: bool = True
    topic: str | None = None
    where: RecallFilter = field(default_factory=RecallFilter)
    activate: bool = True

    def __post_init__(self) -> None:
        check_text(self.query, "query")
        if not self.query.strip():
            raise InvalidInputError("query must not be empty")
        k = self.k
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise InvalidInputError(f"k must be an integer between 1 and {MAX_K}, got {k!r}")
        for name in ("since", "until"):
            if getattr(self, name) is not None:
                check_timestamp(getattr(self, name), name)
        for name in ("dates", "activate"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidInputError(f"{name} must be true or false")
        if self.topic is not None:
            check_text(self.topic, "topic")
        if not isinstance(self.where, RecallFilter):
            raise InvalidInputError("where must be a RecallFilter")

    @classmethod
    def of(cls, query: str | RecallQuery, **options: Unpack[RecallOptions]) -> RecallQuery:
        """A query from text and keywords, or a query with some of its options replaced."""
        if isinstance(query, RecallQuery) and not options:
            return query
        base = query.to_dict() if isinstance(query, RecallQuery) else {"query": query}
        return cls.from_dict(base | dict(options))

    @property
    def filters_used(self) -> list[str]:
        """The names of the filters set (what telemetry may say; never their values)."""
        return self.where.used() + (["topic"] if self.topic is not None else [])

    def to_dict(self) -> dict[str, Any]:
        """The wire form: flat, the filter's fields beside the query's (HTTP's body)."""
        out: dict[str, Any] = {
            "query": self.query,
            "k": self.k,
            "since": self.since,
            "until": self.until,
            "dates": self.dates,
            "topic": self.topic,
            "activate": self.activate,
        }
        for name in FILTER_FIELDS:
            value = getattr(self.where, name)
            out[name] = dict(value) if isinstance(value, Mapping) else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RecallQuery:
        """A query from its wire form; an unknown key is refused by name, a missing
        or null one takes its default."""
        own = {f.name for f in fields(cls)} - {"where"}
        unknown = sorted(set(data) - own - set(FILTER_FIELDS))
        if unknown:
            raise InvalidInputError(f"unknown recall option(s): {', '.join(unknown)}")
        if "query" not in data:
            raise InvalidInputError("query is required")
        kept = {n: data[n] for n in FILTER_FIELDS if data.get(n) is not None}
        given = {n: data[n] for n in own if n in data and (n in _NULLABLE or data[n] is not None)}
        return cls(**given, where=RecallFilter(**kept))


_NULLABLE = frozenset({"since", "until", "topic"})
